"""The chat-tools planner's budgets: model calls, tokens, seconds spent waiting (DESIGN.md section 6.7).

The engine enforces the run's own budgets (proposals, steps, wall time: DESIGN.md section 3);
these are the model's, kept in the planner state so they survive a resume and checked *before*
each request, so a spent budget never costs one more call. Tokens are the server's reported
``usage.total_tokens``. Framework-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.errors import ModelBudgetExhaustedError, PlannerStateError


def usage_zero() -> dict[str, Any]:
    """Nothing used yet: ``{"calls": 0, "tokens": 0, "seconds": 0.0}``."""
    return {"calls": 0, "tokens": 0, "seconds": 0.0}


def usage_read(state_usage: Any) -> dict[str, Any]:
    """The usage from a planner state, checked.

    Raises:
        PlannerStateError: missing or malformed.
    """
    if not isinstance(state_usage, Mapping):
        raise PlannerStateError("chat-tools planner state has no usage")
    calls, tokens, seconds = (state_usage.get(k) for k in ("calls", "tokens", "seconds"))
    if not (isinstance(calls, int) and isinstance(tokens, int) and isinstance(seconds, int | float)):
        raise PlannerStateError("chat-tools planner usage is malformed")
    return {"calls": calls, "tokens": tokens, "seconds": float(seconds)}


def budget_check(usage: Mapping[str, Any], *, max_calls: int, max_tokens: int, max_seconds: float) -> None:
    """Refuse another request when a budget is used up.

    Raises:
        ModelBudgetExhaustedError: naming the budget, its limit and the use so far.
    """
    if usage["calls"] >= max_calls:
        raise ModelBudgetExhaustedError(f"model-call budget of {max_calls} used", budget="calls",
                                        used=usage["calls"], limit=max_calls)
    if usage["tokens"] >= max_tokens:
        raise ModelBudgetExhaustedError(f"token budget of {max_tokens} used", budget="tokens",
                                        used=usage["tokens"], limit=max_tokens)
    if usage["seconds"] >= max_seconds:
        raise ModelBudgetExhaustedError(f"model-time budget of {max_seconds} s used", budget="seconds",
                                        used=round(usage["seconds"], 3), limit=max_seconds)
