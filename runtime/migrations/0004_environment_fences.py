"""Registered environments: one fencing-token counter per environment instance and the location
and identity a byte copy does not carry (DESIGN.md sections 4.6 and 5.4)."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runtime", "0003_receipts_ledger")]

    operations: list = [
        migrations.CreateModel(
            name="EnvironmentRegistration",
            fields=[
                ("instance_id", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("fencing_token", models.BigIntegerField(default=0)),
                ("location", models.CharField(blank=True, default="", max_length=4096)),
                ("identity", models.CharField(blank=True, default="", max_length=64)),
                ("registered_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
        ),
    ]
