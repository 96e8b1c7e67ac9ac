"""Worker presence rows: brokers without broadcast cannot answer Celery's ping, so each worker
says it is alive in the database (DESIGN.md section 5.15)."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runtime', '0013_operator_credentials'),
    ]

    operations = [
        migrations.CreateModel(
            name='WorkerPresence',
            fields=[
                ('name', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('pid', models.IntegerField(default=0)),
                ('queues', models.JSONField(default=list)),
                ('started_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('seen_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
        ),
    ]
