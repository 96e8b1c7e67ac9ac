"""The dashboard's permission to amend a waiting write before approving it (DESIGN.md section 6.11)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('review', '0004_notifications'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='dashboard',
            options={'default_permissions': (), 'managed': False, 'permissions': [
                ('view_runs', 'Can read the runs list, run detail, attachments and health'),
                ('view_trace', 'Can browse trace evidence across runs'),
                ('approve_action', 'Can approve a pending action'),
                ('deny_action', 'Can deny a pending action'),
                ('refresh_approval', 'Can refresh an expired approval'),
                ('amend_action', "Can amend a pending action's arguments before approving it"),
                ('cancel_run', 'Can cancel a run'),
                ('decide_case', 'Can decide a review case (replan or abort)'),
            ]},
        ),
    ]
