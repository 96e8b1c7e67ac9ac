"""Reviewers' registered passkeys (DESIGN.md section 6.9)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("review", "0002_dashboard_scope")]

    operations: list = [
        migrations.CreateModel(
            name="Passkey",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("reviewer", models.CharField(db_index=True, max_length=150)),
                ("credential_id", models.BinaryField(max_length=1023, unique=True)),
                ("public_key", models.BinaryField(max_length=4096)),
                ("sign_count", models.PositiveBigIntegerField(default=0)),
                ("name", models.CharField(blank=True, max_length=100)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("last_used_at", models.DateTimeField(blank=True, null=True)),
            ],
        ),
    ]
