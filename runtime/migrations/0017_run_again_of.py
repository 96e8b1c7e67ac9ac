"""A run started again from a failed or cancelled one names it (DESIGN.md section 6.12)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runtime', '0016_search_terms_covered'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='again_of',
            field=models.CharField(blank=True, db_index=True, default='', max_length=64),
        ),
    ]
