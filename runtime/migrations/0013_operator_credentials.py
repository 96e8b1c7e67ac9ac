"""Operator credentials for the JSON API's operator endpoints (DESIGN.md section 5.13)."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runtime', '0012_run_checkpoint_digest'),
    ]

    operations = [
        migrations.CreateModel(
            name='OperatorCredential',
            fields=[
                ('credential_id', models.CharField(max_length=32, primary_key=True, serialize=False)),
                ('secret_digest', models.CharField(max_length=71)),
                ('tenant_id', models.CharField(max_length=200)),
                ('name', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
    ]
