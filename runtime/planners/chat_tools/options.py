"""The chat-tools planner's options: the ``[planner]`` table of ``kind = "chat-tools"`` (DESIGN.md section 6.7).

Where the model lives (``base_url``, ``model``) comes from the spec or, when the spec leaves it
out, from the environment (``RATCHET_MODEL_BASE_URL``, ``RATCHET_MODEL``). The API key never
appears in a spec, a checkpoint, a trace or a log: the spec names the environment variable that
holds it (``api_key_env``, default ``RATCHET_MODEL_API_KEY``) and the key is read only when the
client is built. Risks stay with deterministic code: ``risks`` maps each action kind to the risk
the policy's approval rules see, whatever the model says. Framework-free: nothing here imports
Django.
"""

from __future__ import annotations

import os
import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from runtime.core.checkpoint import Risk
from runtime.errors import PlannerError

BASE_URL_ENV = "RATCHET_MODEL_BASE_URL"
MODEL_ENV = "RATCHET_MODEL"
DEFAULT_KEY_ENV = "RATCHET_MODEL_API_KEY"
NO_KEY = "no-key"
"""Sent when the key variable is unset: local servers (vLLM, Ollama, llama.cpp) ignore the key."""

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent acting on an environment only through the tools offered. Call exactly one "
    "tool per reply. When the task is complete, call finish with a short summary."
)

Text = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")


class ChatToolsOptions(BaseModel):
    """``[planner]`` options of ``kind = "chat-tools"``. Units: seconds, tokens, counts.

    Attributes:
        task: the instruction given to the model as the first user message.
        system_prompt: the system message (pinned by digest with the run).
        model: the model name; default ``$RATCHET_MODEL``.
        base_url: the OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1``; default
            ``$RATCHET_MODEL_BASE_URL``.
        api_key_env: the environment variable holding the API key (never the key itself).
        timeout_seconds: one request's timeout.
        max_attempts: requests per step before the step's error is raised (bounded retry).
        retry_backoff_seconds / max_backoff_seconds: pause between attempts; a 429's
            ``Retry-After`` is honoured up to the maximum.
        max_model_calls / max_tokens / max_model_seconds: the planner's budgets over the whole
            run (requests, total tokens as the server reports them, seconds spent waiting).
        risks: the risk of each action kind, decided here and never by the model.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    task: Text
    system_prompt: Text = DEFAULT_SYSTEM_PROMPT
    model: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    base_url: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = None
    api_key_env: str = DEFAULT_KEY_ENV
    timeout_seconds: Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)] = 8.0
    max_attempts: Annotated[int, Field(ge=1, le=10)] = 3
    retry_backoff_seconds: Annotated[float, Field(ge=0, le=60, allow_inf_nan=False)] = 0.2
    max_backoff_seconds: Annotated[float, Field(ge=0, le=60, allow_inf_nan=False)] = 2.0
    max_model_calls: Annotated[int, Field(ge=1)] = 200
    max_tokens: Annotated[int, Field(ge=1)] = 1_000_000
    max_model_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 3600.0
    risks: dict[str, Annotated[Risk, Field(strict=False)]] = Field(
        default_factory=lambda: {"write_file": Risk.LOW, "delete_file": Risk.HIGH})

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.match(value):
            raise ValueError("api_key_env names an environment variable (A-Z, 0-9, _), not a key")
        return value

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http:// or https:// URL")
        return value

    def resolved_model(self) -> str:
        """The model name from the spec, else ``$RATCHET_MODEL``.

        Raises:
            PlannerError: neither names a model.
        """
        model = self.model or os.environ.get(MODEL_ENV, "").strip()
        if not model:
            raise PlannerError(f"the chat-tools planner needs a model: set planner.model or {MODEL_ENV}")
        return model

    def resolved_base_url(self) -> str:
        """The endpoint from the spec, else ``$RATCHET_MODEL_BASE_URL``.

        Raises:
            PlannerError: neither names one, or the variable is not an http(s) URL.
        """
        url = self.base_url or os.environ.get(BASE_URL_ENV, "").strip()
        if not url.startswith(("http://", "https://")):
            raise PlannerError(f"the chat-tools planner needs planner.base_url or {BASE_URL_ENV} (an http(s) URL)")
        return url

    def api_key(self) -> str:
        """The key from ``api_key_env`` (or :data:`NO_KEY`); never stored, logged or traced."""
        return os.environ.get(self.api_key_env) or NO_KEY
