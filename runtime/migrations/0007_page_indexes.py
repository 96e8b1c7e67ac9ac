"""Indexes the dashboard's keyset pages read (DESIGN.md section 6.8): the runs list order (all
runs, per phase), the approvals queue order, the trace browser by type or environment version,
and the review cases list order."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runtime", "0006_metrics")]

    operations: list = [
        migrations.AddIndex(
            model_name="reviewcase",
            index=models.Index(fields=["-opened_at", "case_id"], name="case_recent"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["-created_at", "-run_id"], name="run_list_order"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["phase", "-created_at", "-run_id"], name="run_phase_list_order"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["phase", "updated_at", "run_id"], name="run_phase_updated"),
        ),
        migrations.AddIndex(
            model_name="traceevent",
            index=models.Index(fields=["event_type", "-id"], name="trace_type_recent"),
        ),
        migrations.AddIndex(
            model_name="traceevent",
            index=models.Index(fields=["environment_version", "-id"], name="trace_envver_recent"),
        ),
    ]
