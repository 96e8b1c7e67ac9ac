"""What the dashboard's content search reads (DESIGN.md section 6.8): ``RunSearchTerm``, filled
from now on when an intent is committed, and here once from the intents already in the trace."""

import django.db.models.deletion
from django.db import migrations, models

BATCH = 2_000


def backfill(apps, schema_editor):
    """The terms of every ``intent.proposed`` event already recorded (read in id order, in
    batches: memory stays flat however long the trace is)."""
    from runtime.core.search_text import INTENT_EVENT, intent_terms

    trace_event = apps.get_model("runtime", "TraceEvent")
    term_model = apps.get_model("runtime", "RunSearchTerm")
    alias = schema_editor.connection.alias
    events = (trace_event.objects.using(alias).filter(event_type=INTENT_EVENT).order_by("id")
              .values_list("run_id", "payload"))
    rows = []
    for run_id, payload in events.iterator(chunk_size=BATCH):
        if isinstance(payload, dict):
            rows.extend(term_model(run_id=run_id, kind=kind, term=term) for kind, term in intent_terms(payload))
        if len(rows) >= BATCH:
            term_model.objects.using(alias).bulk_create(rows, ignore_conflicts=True)
            rows = []
    if rows:
        term_model.objects.using(alias).bulk_create(rows, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [("runtime", "0010_admission_thresholds")]

    operations = [
        migrations.CreateModel(
            name="RunSearchTerm",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(max_length=16)),
                ("term", models.CharField(max_length=200)),
                ("run", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                          related_name="search_terms", to="runtime.run")),
            ],
            options={
                "indexes": [models.Index(fields=["term", "run"], name="run_search_term_prefix",
                                         opclasses=["varchar_pattern_ops", "varchar_pattern_ops"])],
                "constraints": [models.UniqueConstraint(fields=("run", "kind", "term"), name="run_search_term_unique")],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
        # The runs list's sorts by tenant, task and phase are keyset-paged on (column, run_id):
        # these serve that order (the existing (tenant_id, task_id) and (phase, ...) do not).
        # Plain SQL, valid on both databases, so the Run model's Meta stays as it is.
        *(migrations.RunSQL(f"CREATE INDEX {name} ON runtime_run ({column}, run_id)", f"DROP INDEX {name}")
          for name, column in (("run_tenant_order", "tenant_id"), ("run_task_order", "task_id"),
                               ("run_phase_order", "phase"))),
    ]
