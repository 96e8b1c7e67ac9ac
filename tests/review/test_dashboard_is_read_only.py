"""The dashboard never writes runtime tables (DESIGN.md section 2: "never writes runtime tables
behind the runtime's back")."""

from __future__ import annotations

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runtime.evidence.attachments import attachment_put
from runtime.models import Phase
from tests.factories import make_state
from tests.review.rows import build_run, pending_state

RUNTIME_TABLES = ("runtime_",)


def test_it_never_writes_a_runtime_table_while_reading_every_page(
    client_for, checkpoint_keyring
) -> None:
    blob = attachment_put(data=b"diff", content_type="text/plain")
    state = pending_state(make_state(run_id="run-ro"), attachments=[blob])
    build_run(
        checkpoint_keyring,
        run_id="run-ro",
        phase=Phase.PENDING.value,
        state=state,
        owner_worker="w",
    )
    client = client_for("admin")
    urls = [
        reverse("review:runs"),
        reverse("review:run", args=["run-ro"]),
        reverse("review:trace") + "?run=run-ro",
        reverse("review:health"),
        reverse("review:attachment", args=[blob]),
    ]
    with CaptureQueriesContext(connection) as ctx:
        for url in urls:
            assert client.get(url).status_code == 200
            for target in ("run-status", "checkpoints", "timeline"):
                client.get(url, headers={"HX-Request": "true", "HX-Target": target})
    writes = [
        q["sql"]
        for q in ctx.captured_queries
        if re.match(r"\s*(INSERT|UPDATE|DELETE|ALTER|DROP|CREATE)", q["sql"], re.I)
    ]
    assert not [sql for sql in writes if any(t in sql for t in RUNTIME_TABLES)], writes
    assert len(ctx.captured_queries) > len(urls), "the pages did read"
