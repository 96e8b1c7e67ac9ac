"""Build-time reference pages (mkdocs-gen-files): commands, settings, HTTP API and metrics.

Each page is generated from the code that does the work, so it cannot drift: the management
commands from their argument parsers, the settings from ``runtime.project.environment`` (the
table ``settings.py`` reads through), the HTTP API from the OpenAPI document the gateway's
django-ninja API produces, the metrics from ``CounterCollector.describe()``. Nothing here needs a
database: Django is set up with the project's settings on a scratch ``RATCHET_VAR_DIR`` when the
builder did not name one.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import mkdocs_gen_files
from markdown.extensions.toc import slugify

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.project.settings")
os.environ.setdefault("RATCHET_VAR_DIR", tempfile.mkdtemp(prefix="ratchet-docs-"))

import django  # noqa: E402

django.setup()

import command_page  # noqa: E402
import concept_pages  # noqa: E402

from runtime.project.environment import READ_ELSEWHERE, VARIABLES  # noqa: E402


def _cell(text: str) -> str:
    return command_page.prose(text).replace("|", "\\|")


def settings_page() -> str:
    lines = ["# Settings", "",
             "Every environment variable Ratchet reads, generated from `runtime/project/environment.py`, the "
             "table `runtime/project/settings.py` reads its variables through (kind and default come from "
             "the same row). A malformed value stops the process with `ImproperlyConfigured` naming the "
             "variable. Kinds: `seconds` is a positive finite number, `positive_int` an integer of at least 1, "
             "`bool` accepts `1/0, true/false, yes/no, on/off`, `list` is comma-separated.", ""]
    sections: dict[str, list] = {}
    for row in (*VARIABLES, *READ_ELSEWHERE):
        sections.setdefault(row.section, []).append(row)
    for section, rows in sections.items():
        lines += [f"## {section}", "", "| variable | kind | default | what it does |", "|---|---|---|---|"]
        for row in rows:
            where = f" Read in `{row.read_in}`." if row.read_in else ""
            setting = f" Django setting `{row.setting}`." if row.setting else ""
            lines.append(f"| `{row.name}` | {row.kind} | {_cell(row.shown_default())} | "
                         f"{_cell(row.help)}{setting}{where} |")
        lines.append("")
    return "\n".join(lines)


def _schema_ref(schema: dict) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{name.lower()})"
    if schema.get("type") == "array":
        return f"array of {_schema_ref(schema.get('items', {}))}"
    return f"`{schema.get('type', 'object')}`"


def api_page(schema: dict) -> str:
    info = schema.get("info", {})
    lines = ["# HTTP API", "",
             f"Generated from the OpenAPI document of **{info.get('title', '')}** (version {info.get('version', '')}), "
             "the same document the web process serves at `/api/v1/openapi.json`; "
             "[download this build's copy](openapi.json). Every call needs `Authorization: Bearer <gateway token>` "
             "(`manage.py gateway_tokens issue`). Refusals are "
             '`{"error": {"code", "message", "hint", "retryable", "context"}}`.', ""]
    for path, methods in schema.get("paths", {}).items():
        for method, op in methods.items():
            lines += [f"## `{method.upper()} {path}`", ""]
            if op.get("summary"):
                lines += [f"**{op['summary']}**", ""]
            if op.get("description"):
                lines += [op["description"].strip(), ""]
            params = op.get("parameters", [])
            if params:
                lines += ["| parameter | in | required | type |", "|---|---|---|---|"]
                for p in params:
                    lines.append(f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | "
                                 f"{_schema_ref(p.get('schema', {}))} |")
                lines.append("")
            body = op.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                lines += [f"Request body ({media}): {_schema_ref(content.get('schema', {}))}", ""]
            lines += ["| status | body |", "|---|---|"]
            for status, resp in op.get("responses", {}).items():
                content = resp.get("content", {})
                shape = ", ".join(_schema_ref(c.get("schema", {})) for c in content.values()) or _cell(
                    resp.get("description", ""))
                lines.append(f"| {status} | {shape} |")
            lines.append("")
    lines += ["## Schemas", ""]
    for name, comp in schema.get("components", {}).get("schemas", {}).items():
        lines += [f"### {name}", ""]
        if comp.get("description"):
            lines += [_cell(comp["description"]), ""]
        props = comp.get("properties", {})
        if props:
            required = set(comp.get("required", []))
            lines += ["| field | type | required | description |", "|---|---|---|---|"]
            for field, spec in props.items():
                lines.append(f"| `{field}` | {_schema_ref(spec)} | {'yes' if field in required else 'no'} | "
                             f"{_cell(spec.get('description', spec.get('title', '')))} |")
            lines.append("")
    return "\n".join(lines)


def metrics_page() -> str:
    from runtime.observability.export import CounterCollector
    from runtime.observability.rules import DURATION_BUCKETS_SECONDS

    lines = ["# Prometheus metrics", "",
             "Generated from the collector behind `GET /metrics` (`runtime/observability/export.py`, "
             "`CounterCollector.describe()`). Counters are kept per tenant and task as trace events commit "
             "(DESIGN.md section 8.1); `GET /metrics` needs `Authorization: Bearer $RATCHET_METRICS_TOKEN`, or "
             "comes from loopback when no token is set.", "",
             "| metric | type | labels | what it counts |", "|---|---|---|---|"]
    for family in CounterCollector().describe():
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = ", ".join(f"`{label}`" for label in getattr(family, "_labelnames", ()))
        lines.append(f"| `{name}` | {family.type} | {labels} | {_cell(family.documentation)} |")
    bounds = ", ".join(f"{b:g}" for b in DURATION_BUCKETS_SECONDS)
    lines += ["", f"The recovery duration histogram's bucket bounds (seconds): {bounds}, +Inf.", ""]
    return "\n".join(lines)


def main() -> None:
    from django.core.management import get_commands

    commands = sorted(name for name, app in get_commands().items() if app in ("runtime", "review"))
    with mkdocs_gen_files.open("reference/commands.md", "w") as out:
        out.write("# Management commands\n\nGenerated from each command's argument parser "
                  "(`manage.py <command> --help` prints the same). Django's own options (`--verbosity`, "
                  "`--settings`, `--traceback`, ...) are left out.\n\n")
        out.write("| command | what it does |\n|---|---|\n")
        for name in commands:
            out.write(f"| [`{name}`](#{slugify(name, '-')}) | {_cell(command_page.summary(name))} |\n")
        out.write("\n")
        for name in commands:
            out.write(command_page.render(name))
    with mkdocs_gen_files.open("reference/settings.md", "w") as out:
        out.write(settings_page())
    from runtime.api.v1 import api

    schema = api.get_openapi_schema()
    with mkdocs_gen_files.open("reference/openapi.json", "w") as out:
        json.dump(schema, out, indent=2, sort_keys=True, default=str)
    with mkdocs_gen_files.open("reference/http-api.md", "w") as out:
        out.write(api_page(json.loads(json.dumps(schema, default=str))))
    with mkdocs_gen_files.open("reference/metrics.md", "w") as out:
        out.write(metrics_page())
    concept_pages.write_all()


main()
