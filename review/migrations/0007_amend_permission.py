"""The amend permission (DESIGN.md section 6.13)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('review', '0006_restart_run'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='dashboard',
            options={'default_permissions': (), 'managed': False, 'permissions': [('view_runs', 'Can read the runs list, run detail, attachments and health'), ('view_trace', 'Can browse trace evidence across runs'), ('approve_action', 'Can approve a pending action'), ('deny_action', 'Can deny a pending action'), ('refresh_approval', 'Can refresh an expired approval'), ('amend_action', "Can amend a pending action's arguments before approving it"), ('cancel_run', 'Can cancel a run'), ('decide_case', 'Can decide a review case (replan or abort)'), ('restart_run', 'Can resume a run stopped for an infrastructure reason, or run a failed run again')]},
        ),
    ]
