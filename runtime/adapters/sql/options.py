"""The SQL adapter's options: target, statement templates, parameter schemas, redacted columns.

Declared as pydantic models (a plug-in validates its own options, DESIGN.md section 5.10) so every bad field is
reported with its TOML path under ``[environment.options]``. A task spec never carries SQL the
model wrote: it names the only statements a run may apply (DESIGN.md section 5.11), each a single
parameterized statement with ``:name`` placeholders and a schema for every parameter. Imports
nothing from Django.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints, model_validator

from runtime.adapters.sql.statement_tables import written_tables

IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
"""Table, column and template names: plain SQL identifiers, quoted by the dialect when used."""

PLACEHOLDER_RE = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")
"""A ``:name`` bind placeholder (not a ``::type`` cast), as SQLAlchemy's ``text()`` reads it."""

ADAPTER_TABLES = ("ratchet_sql_receipts", "ratchet_sql_fence", "ratchet_sql_instance")
"""Tables the adapter owns in the target database; no template may name them."""

Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_RE.pattern)]
ColumnRef = Annotated[str, StringConstraints(pattern=r"^([A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$")]
"""``"table.column"`` or ``"column"`` (that column in every observed table)."""


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SqlParam(_Options):
    """The schema of one template parameter (a small JSON Schema subset).

    Attributes:
        type: ``"string"``, ``"integer"``, ``"number"`` or ``"boolean"``.
        required: the action must give it (default True); a left-out optional one binds NULL.
        nullable: ``null`` is accepted (SQL NULL).
        min_length, max_length, pattern: string bounds (characters; a regular expression, anchor it with ^ and $).
        minimum, maximum: inclusive numeric bounds.
        enum: the only accepted values.
        description: shown to a model-driven planner as the tool argument's description.
        redact: the value is secret or personal, so an action gives it only as a placeholder
            ``{"$secret": "<input name>"}`` (see ``secret_inputs``); a parameter named like a
            column in ``redact_columns`` is redacted without saying so.
    """

    type: Literal["string", "integer", "number", "boolean"]
    required: bool = True
    nullable: bool = False
    min_length: Annotated[int, Field(ge=0)] | None = None
    max_length: Annotated[int, Field(ge=1, le=1_000_000)] = 4096
    pattern: Annotated[str, StringConstraints(max_length=500)] | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    enum: list[JsonValue] | None = None
    description: Annotated[str, StringConstraints(max_length=500)] = ""
    redact: bool = False

    @model_validator(mode="after")
    def _bounds_fit_type(self) -> SqlParam:
        if self.type != "string" and (self.pattern is not None or self.min_length is not None):
            raise ValueError("pattern and min_length apply to string parameters only")
        if self.type not in ("integer", "number") and (self.minimum is not None or self.maximum is not None):
            raise ValueError("minimum and maximum apply to integer and number parameters only")
        return self


class SqlTemplate(_Options):
    """One statement a run may apply (``[environment.options.templates.<name>]``).

    Attributes:
        sql: one parameterized statement (``INSERT``/``UPDATE``/``DELETE``, optionally with
            ``RETURNING``); values only through ``:name`` placeholders.
        params: the schema of every placeholder, by name; each placeholder must be declared
            and each declared parameter used.
        tables: the tables the statement touches; their rows make up the observation.
        expect_rows: if set, the statement must change exactly this many rows or the whole
            transaction (business write, receipt, fence) is rolled back.
        description: shown to a model-driven planner as the tool's description.
    """

    sql: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    params: dict[Identifier, SqlParam] = Field(default_factory=dict)
    tables: Annotated[list[Identifier], Field(min_length=1)]
    expect_rows: Annotated[int, Field(ge=0)] | None = None
    description: Annotated[str, StringConstraints(max_length=2000)] = ""

    @model_validator(mode="after")
    def _one_safe_statement(self) -> SqlTemplate:
        body = self.sql.strip().rstrip(";").strip()
        if ";" in body:
            raise ValueError("a template is exactly one statement (no ';' inside)")
        lowered = body.lower()
        for owned in ADAPTER_TABLES:
            if owned in lowered:
                raise ValueError(f"a template must not touch the adapter's own table {owned}")
        used = set(PLACEHOLDER_RE.findall(body))
        declared = set(self.params)
        if used - declared:
            raise ValueError(f"placeholders without a parameter schema: {sorted(used - declared)}")
        if declared - used:
            raise ValueError(f"parameters the statement does not use: {sorted(declared - used)}")
        # The observation covers the listed tables only: a write anywhere else would go unseen.
        unlisted = written_tables(body) - {table.lower() for table in self.tables}
        if unlisted:
            raise ValueError(f"the statement writes tables its 'tables' list leaves out: {sorted(unlisted)}")
        return self


class SqlAdapterOptions(_Options):
    """``[environment.options]`` of ``adapter = "sql"``.

    Attributes:
        url: the target database, ``sqlite:///path`` or ``postgres://user@host:port/db``. A
            relative SQLite path is taken against the task file's directory. Leave it out to
            use ``environment.target`` (a SQLite file path); never put a password here: use
            ``url_env``.
        url_env: name of an environment variable holding the URL (for credentials).
        templates: the statements a run may apply, by name; an action's ``kind`` names one.
        redact_columns: ``"table.column"`` or ``"column"`` values replaced by a keyed digest in
            every receipt, observation, diff and error (DESIGN.md section 5.9); the key is
            the runtime's redaction key (``RATCHET_REDACTION_KEY``), never in the spec.
        secret_inputs: ``input name -> environment variable``: where a redacted parameter's
            value comes from when the adapter runs the statement, so actions (checkpointed and
            traced) never hold it.
        fingerprint_ignore: ``"table.column"``/``"column"`` left out of the content fingerprint
            (a PostgreSQL ``serial`` a rolled-back prediction advances).
        statement_timeout_seconds: upper bound for one transaction's lock waits (seconds).
    """

    url: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None
    url_env: Identifier | None = None
    templates: Annotated[dict[Identifier, SqlTemplate], Field(min_length=1)]
    redact_columns: list[ColumnRef] = Field(default_factory=list)
    secret_inputs: dict[Identifier, Identifier] = Field(default_factory=dict)
    fingerprint_ignore: list[ColumnRef] = Field(default_factory=list)
    statement_timeout_seconds: Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)] = 30.0

    @model_validator(mode="after")
    def _one_url_source(self) -> SqlAdapterOptions:
        if self.url is not None and self.url_env is not None:
            raise ValueError("give url or url_env, not both")
        if self.url is not None and re.match(r"^[a-z+]+://[^/@]*:[^/@]*@", self.url):
            raise ValueError("url carries a password; put the URL in an environment variable and name it in url_env")
        return self

    def redacted_params(self, template: str) -> set[str]:
        """Parameters of ``template`` whose values are shown only as keyed digests."""
        columns = {c.rsplit(".", 1)[-1] for c in self.redact_columns}
        return {name for name, param in self.templates[template].params.items() if param.redact or name in columns}

    def observed_tables(self) -> list[str]:
        """Every table some template touches, sorted: the rows an observation covers."""
        return sorted({table for template in self.templates.values() for table in template.tables})
