"""From an action to a bound statement: the template it names and its checked parameters.

An action of the SQL adapter is ``Action(kind=<template name>, target="", params={...})``: the
template text comes from the task spec, the action only supplies values, and every value is
checked against the template's parameter schema before any connection is opened (DESIGN.md
section 5.11). The same schemas, as JSON Schema, are what a model-driven planner is offered as
tools. Imports nothing from Django.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from runtime.adapters.sql.options import SqlAdapterOptions, SqlParam, SqlTemplate
from runtime.core.checkpoint import Action
from runtime.errors import SqlParamsInvalidError, SqlTemplateNotAllowedError

_PY_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
SECRET_MARK = "$secret"
"""The placeholder key of a secret input, as the HTTP adapter spells it."""


@dataclass(frozen=True)
class BoundStatement:
    """A template with parameters that passed its schema; safe to hand to the driver."""

    name: str
    template: SqlTemplate
    params: dict[str, Any]


def _field(param: SqlParam) -> tuple[Any, Any]:
    py: Any = _PY_TYPES[param.type]
    if param.nullable:
        py = py | None
    constraints: dict[str, Any] = {"description": param.description or None}
    if param.type == "string":
        constraints.update(min_length=param.min_length, max_length=param.max_length, pattern=param.pattern)
    if param.type in ("integer", "number"):
        constraints.update(ge=param.minimum, le=param.maximum)
    if param.enum is not None:
        constraints["json_schema_extra"] = {"enum": list(param.enum)}
    default = ... if param.required else None
    return py, Field(default, **{k: v for k, v in constraints.items() if v is not None})


def params_model(name: str, template: SqlTemplate) -> type[BaseModel]:
    """A strict pydantic model of ``template``'s parameters (unknown names rejected)."""
    fields = {pname: _field(param) for pname, param in template.params.items()}
    return create_model(  # type: ignore[call-overload, no-any-return]
        f"{name}_params", __config__=ConfigDict(extra="forbid", strict=True), **fields)


class TemplateBook:
    """The templates of one adapter, each with its compiled parameter model.

    Args:
        options: the validated adapter options.
    """

    def __init__(self, options: SqlAdapterOptions) -> None:
        self._templates = dict(options.templates)
        self._models = {name: params_model(name, t) for name, t in self._templates.items()}
        self._secret = {name: options.redacted_params(name) for name in self._templates}
        self._inputs = dict(options.secret_inputs)

    def names(self) -> list[str]:
        """Template names, sorted."""
        return sorted(self._templates)

    def bind(self, action: Action, *, environ: Mapping[str, str] | None = None) -> BoundStatement:
        """Check ``action`` against the template it names and return the bound statement.

        Args:
            action: the proposed action.
            environ: where secret inputs are read (default ``os.environ``).

        Raises:
            SqlTemplateNotAllowedError: ``action.kind`` names no template of this adapter, or
                the action carries a target (templates take values only through parameters).
            SqlParamsInvalidError: a parameter fails the schema; the error lists each field and
                problem, never the value (it may be personal data). Also: a raw value where a
                secret input placeholder belongs, an undeclared input, an unset variable.
        """
        template = self._templates.get(action.kind)
        if template is None:
            raise SqlTemplateNotAllowedError(template=repr(action.kind[:80]), allowed=",".join(self.names()))
        if action.target:
            raise SqlTemplateNotAllowedError("a SQL action takes no target, only parameters", template=action.kind)
        params = self._resolve(action.kind, action.params, os.environ if environ is None else environ)
        try:
            checked = self._models[action.kind].model_validate(params)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(params)'}: {err['msg']}" for err in exc.errors()[:10])
            raise SqlParamsInvalidError(f"parameters fail the template's schema: {problems}",
                                        template=action.kind) from None
        params = checked.model_dump()
        for pname, param in template.params.items():
            if param.enum is not None and params.get(pname) not in param.enum and params.get(pname) is not None:
                raise SqlParamsInvalidError(f"parameters fail the template's schema: {pname}: not one of the allowed "
                                            "values", template=action.kind)
        return BoundStatement(name=action.kind, template=template, params=params)

    def _resolve(self, name: str, given: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
        params = dict(given)
        for pname in sorted(self._secret[name] & set(params)):
            value = params[pname]
            if not (isinstance(value, dict) and set(value) == {SECRET_MARK}):
                raise SqlParamsInvalidError(f"{pname}: a secret or personal parameter must be given as "
                                            '{"$secret": NAME}, never inline', template=name)
            source = self._inputs.get(value[SECRET_MARK]) if isinstance(value[SECRET_MARK], str) else None
            if source is None:
                raise SqlParamsInvalidError(f"{pname}: names no secret input of the adapter's secret_inputs",
                                            template=name)
            if source not in environ:
                raise SqlParamsInvalidError(f"{pname}: the secret input's environment variable is unset",
                                            template=name, variable=source)
            params[pname] = environ[source]
        return params

    def json_schemas(self) -> dict[str, dict[str, Any]]:
        """``name -> {"description", "parameters"}``: each template as a tool a model may call.

        ``parameters`` is the JSON Schema of the template's parameter model; a secret parameter
        is described as the placeholder object naming one of the secret inputs.
        """
        out: dict[str, dict[str, Any]] = {}
        for name in self.names():
            schema = self._models[name].model_json_schema()
            for pname in self._secret[name]:
                schema["properties"][pname] = {
                    "type": "object", "additionalProperties": False, "required": [SECRET_MARK],
                    "properties": {SECRET_MARK: {"enum": sorted(self._inputs)}},
                    "description": "a secret input by name; the value never enters the action"}
            out[name] = {"description": self._templates[name].description or f"apply the {name} statement",
                         "parameters": schema}
        return out


def _secret_placeholder(inputs: list[str]) -> type[BaseModel]:
    names: Any = Literal[tuple(inputs)] if inputs else Literal["(no secret inputs declared)"]
    return create_model(  # type: ignore[call-overload, no-any-return]
        "SecretInput", __config__=ConfigDict(extra="forbid", strict=True, populate_by_name=False),
        __doc__="A secret input by name; the value never enters the action.",
        secret=(names, Field(..., alias=SECRET_MARK)))


def sql_action_models(*, options: SqlAdapterOptions) -> dict[str, type[BaseModel]]:
    """The adapter's declared actions: one per template, a model of ``{"target", "params"}``.

    DESIGN.md sections 5.10 and 5.11. ``target`` is always empty (a template takes values only
    through parameters); ``params`` is the template's parameter schema, except that a secret or
    personal parameter is the placeholder ``{"$secret": <one of secret_inputs>}``, as an action
    must carry it. The model checks an action's *shape* before the run: whether the policy allows
    the template stays with the policy gate. A model-driven planner offers these as its tools.
    """
    placeholder = _secret_placeholder(sorted(options.secret_inputs))
    models: dict[str, type[BaseModel]] = {}
    for name in sorted(options.templates):
        template = options.templates[name]
        secret = options.redacted_params(name)
        fields: dict[str, Any] = {}
        # Sorted: a stored spec's options may come back with their keys reordered (PostgreSQL's
        # jsonb does), and the schema -- a chat-tools run pins its digest -- must not move with them.
        for pname, param in sorted(template.params.items()):
            if pname in secret:
                fields[pname] = (placeholder, ... if param.required else None)
            else:
                fields[pname] = _field(param)
        params = create_model(  # type: ignore[call-overload]
            f"{name}_params", __config__=ConfigDict(extra="forbid", strict=True), **fields)
        models[name] = create_model(  # type: ignore[call-overload]
            f"{name}_action", __config__=ConfigDict(extra="forbid", strict=True, frozen=True),
            __doc__=template.description or f"Apply the {name} statement.",
            target=(Literal[""], ""), params=(params, ...))
    return models
