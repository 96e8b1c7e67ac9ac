"""Version combinations as deployable objects and regress records (DESIGN.md sections 8.4 and 8.5)."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runtime", "0007_page_indexes")]

    operations = [
        migrations.CreateModel(
            name='Combination',
            fields=[
                ('combination_id', models.CharField(max_length=71, primary_key=True, serialize=False)),
                ('fields', models.JSONField()),
                ('state', models.CharField(default='canary', max_length=16)),
                ('share', models.FloatField(default=0.0)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('changed_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
        ),
        migrations.CreateModel(
            name='CombinationEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=64)),
                ('actor', models.CharField(max_length=200)),
                ('reason', models.TextField(blank=True, default='')),
                ('payload', models.JSONField(blank=True, default=dict)),
                ('at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('combination', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='history', to='runtime.combination')),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.CreateModel(
            name='CombinationRun',
            fields=[
                ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='combination_pin', serialize=False, to='runtime.run')),
                ('combination', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='runtime.combination')),
            ],
        ),
        migrations.CreateModel(
            name='RegressRecord',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('passed', models.BooleanField()),
                ('results', models.JSONField()),
                ('at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('combination', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='regress_records', to='runtime.combination')),
            ],
            options={
                'abstract': False,
            },
        ),
    ]
