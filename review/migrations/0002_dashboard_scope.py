"""Dashboard scope: the tenants a user or a group may see (DESIGN.md section 6.6)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    # The review chain is unchanged; auth and the user model are added because the scope rows
    # point at users and groups.
    dependencies = [
        ("review", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations: list = [
        migrations.CreateModel(
            name="DashboardScope",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("all_tenants", models.BooleanField(default=False)),
                ("tenant_ids", models.JSONField(blank=True, default=list)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("group", models.OneToOneField(blank=True, null=True,
                                               on_delete=django.db.models.deletion.CASCADE,
                                               related_name="dashboard_scope", to="auth.group")),
                ("user", models.OneToOneField(blank=True, null=True,
                                              on_delete=django.db.models.deletion.CASCADE,
                                              related_name="dashboard_scope",
                                              to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("group__isnull", True), ("user__isnull", False)),
                            models.Q(("group__isnull", False), ("user__isnull", True)),
                            _connector="OR",
                        ),
                        name="dashboard_scope_user_xor_group",
                    )
                ],
            },
        ),
    ]
