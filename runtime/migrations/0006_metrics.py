"""Counters kept as trace events happen, open recoveries (DESIGN.md section 8.1), and signed
admission decisions (section 8.3)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runtime", "0005_gateway")]

    operations: list = [
        migrations.CreateModel(
            name="RecoveryWatch",
            fields=[
                ("run_id", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("tenant_id", models.CharField(max_length=200)),
                ("task_id", models.CharField(max_length=200)),
                ("open", models.IntegerField(default=0)),
                ("durations", models.JSONField(default=list)),
                ("nothing_to_recover", models.BooleanField(default=False)),
            ],
        ),
        migrations.CreateModel(
            name="MetricCounter",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("name", models.CharField(max_length=64)),
                ("tenant_id", models.CharField(max_length=200)),
                ("task_id", models.CharField(max_length=200)),
                ("label", models.CharField(blank=True, default="", max_length=64)),
                ("window_start", models.BigIntegerField()),
                ("value", models.FloatField(default=0.0)),
            ],
            options={
                "constraints": [models.UniqueConstraint(
                    fields=("name", "tenant_id", "task_id", "label", "window_start"),
                    name="metric_counter_cell")],
            },
        ),
        migrations.CreateModel(
            name="AdmissionDecision",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("tenant_id", models.CharField(max_length=200)),
                ("task_id", models.CharField(max_length=200)),
                ("decided_by", models.CharField(max_length=200)),
                ("reason", models.TextField()),
                ("decided_at", models.DateTimeField()),
                ("body", models.JSONField()),
                ("key_id", models.CharField(max_length=200)),
                ("signature", models.CharField(max_length=256)),
            ],
            options={
                "indexes": [models.Index(fields=["tenant_id", "task_id", "decided_at"],
                                         name="runtime_adm_tenant__eebf6a_idx")],
            },
        ),
    ]
