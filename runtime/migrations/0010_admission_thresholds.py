"""Admission thresholds edited by admins, with their audit trail (DESIGN.md section 8.3)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runtime", "0009_page_sort_indexes")]

    operations = [
        migrations.CreateModel(
            name="AdmissionClosing",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tenant_id", models.CharField(max_length=200)),
                ("task_id", models.CharField(max_length=200)),
                ("metric", models.CharField(max_length=64)),
                ("value", models.FloatField()),
                ("threshold", models.FloatField()),
                ("closed_at", models.DateTimeField()),
            ],
            options={
                "indexes": [models.Index(fields=["tenant_id", "task_id", "closed_at"],
                                         name="runtime_adm_tenant__379bd8_idx")],
            },
        ),
        migrations.CreateModel(
            name="AdmissionThreshold",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tenant_id", models.CharField(max_length=200)),
                ("task_id", models.CharField(max_length=200)),
                ("name", models.CharField(max_length=32)),
                ("value", models.FloatField()),
                ("changed_by", models.CharField(max_length=200)),
                ("changed_at", models.DateTimeField()),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("tenant_id", "task_id", "name"),
                                                        name="admission_threshold_scope_name")],
            },
        ),
        migrations.CreateModel(
            name="AdmissionThresholdChange",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tenant_id", models.CharField(max_length=200)),
                ("task_id", models.CharField(max_length=200)),
                ("name", models.CharField(max_length=32)),
                ("old_value", models.FloatField(blank=True, null=True)),
                ("new_value", models.FloatField(blank=True, null=True)),
                ("changed_by", models.CharField(max_length=200)),
                ("changed_at", models.DateTimeField()),
                ("reason", models.TextField()),
            ],
            options={
                "indexes": [models.Index(fields=["tenant_id", "task_id", "changed_at"],
                                         name="runtime_adm_tenant__5d9b21_idx")],
            },
        ),
    ]
