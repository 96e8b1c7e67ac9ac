"""Reserved migration slot (filled by the work it is named for; empty operations are a no-op)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("review", "0003_dashboard_scope")]

    operations: list = []
