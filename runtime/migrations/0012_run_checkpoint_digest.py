"""The run row names the digest of the generation the main database committed, so a commit whose
mark did not move is completed for exactly that checkpoint (DESIGN.md section 4.3). Existing rows
start empty: a run committed before never has its mirror ahead of its mark."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runtime', '0011_content_search'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='checkpoint_digest',
            field=models.CharField(blank=True, default='', max_length=71),
        ),
    ]
