"""The agent gateway's tokens (DESIGN.md section 5.12)."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runtime", "0004_environment_fences")]

    operations: list = [
        migrations.CreateModel(
            name="GatewayToken",
            fields=[
                ("token_id", models.CharField(max_length=32, primary_key=True, serialize=False)),
                ("secret_digest", models.CharField(max_length=71)),
                ("tenant_id", models.CharField(max_length=200)),
                ("agent", models.CharField(blank=True, default="", max_length=200)),
                ("actions", models.JSONField(blank=True, default=list)),
                ("created_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                ("window_started_at", models.DateTimeField(blank=True, null=True)),
                ("window_calls", models.IntegerField(default=0)),
                ("run", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                          related_name="gateway_tokens", to="runtime.run")),
            ],
        ),
        migrations.AlterField(
            model_name="gatewaytoken",
            name="run",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="gateway_tokens", to="runtime.run"),
        ),
        migrations.AddField(
            model_name="gatewaytoken",
            name="run_ids",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="gatewaytoken",
            name="task_id",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
    ]
