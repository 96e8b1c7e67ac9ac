"""The base of every plug-in's options model (DESIGN.md section 5.10).

A plug-in declares its options as a pydantic model; the registry validates the task spec's
``[planner.options]``, ``[environment.options]`` or ``[verifier.options]`` table with it. Models
built on :class:`StrictOptions` refuse unknown fields (a typo is an error naming its TOML path,
not a silently ignored option), take TOML values at their type (a string is never read as a
number) and are frozen, so a run's options cannot change after validation. Framework-free.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictOptions(BaseModel):
    """Unknown fields rejected, strict types, frozen: the base of plug-in options and task specs."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class NoOptions(StrictOptions):
    """A plug-in that takes no options: any field given is reported as unknown."""
