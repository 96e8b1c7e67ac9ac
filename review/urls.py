"""Dashboard URLs. Every view here is wrapped in ``review.permissions.require_perm``; the
authorization matrix test (``tests/review/test_authorization_matrix.py``) fails for a new URL
that is missing from it."""

from django.urls import path

from review.views import approvals, cases, environments, health, notifications, passkeys, rollout, runs, tokens, trace

app_name = "review"
urlpatterns = [
    path("", runs.runs_list, name="runs"),
    path("runs/<str:run_id>/", runs.run_detail, name="run"),
    path("runs/<str:run_id>/cancel/", runs.run_cancel, name="run-cancel"),
    path("runs/<str:run_id>/environment/reregister/", environments.environment_reregister_view,
         name="environment-reregister"),
    path("runs/<str:run_id>/bundle/", runs.run_bundle, name="run-bundle"),
    path("runs/<str:run_id>/tokens/", tokens.run_tokens, name="run-tokens"),
    path("attachments/<str:digest>/", runs.attachment_download, name="attachment"),
    path("trace/", trace.trace_browser, name="trace"),
    path("health/", health.health, name="health"),
    path("workers/", health.workers, name="workers"),
    path("approvals/", approvals.approvals, name="approvals"),
    path("approvals/<str:run_id>/approve/", approvals.approval_approve, name="approve"),
    path("approvals/<str:run_id>/refresh/", approvals.approval_refresh, name="refresh"),
    path("approvals/<str:run_id>/deny/", approvals.approval_deny, name="deny"),
    path("cases/", cases.cases, name="cases"),
    path("cases/<str:case_id>/", cases.case_detail, name="case"),
    path("cases/<str:case_id>/decide/", cases.case_decide, name="decide"),
    path("cases/<str:case_id>/passkey/options/", passkeys.passkey_decision_options,
         name="decide-passkey-options"),
    path("cases/<str:case_id>/passkey/", passkeys.passkey_decide, name="decide-passkey"),
    path("passkeys/", passkeys.passkeys, name="passkeys"),
    path("passkeys/options/", passkeys.passkey_register_options, name="passkey-options"),
    path("passkeys/register/", passkeys.passkey_register, name="passkey-register"),
    path("notifications/", notifications.notifications, name="notifications"),
    path("notifications/add/", notifications.notification_add, name="notification-add"),
    path("notifications/change/", notifications.notification_change, name="notification-change"),
    path("rollout/", rollout.rollout, name="rollout"),
    path("rollout/admission/<str:tenant_id>/<str:task_id>/", rollout.admission_scope, name="admission-scope"),
    path("rollout/admission/<str:tenant_id>/<str:task_id>/threshold/", rollout.admission_threshold,
         name="admission-threshold"),
    path("rollout/admission/<str:tenant_id>/<str:task_id>/reopen/", rollout.admission_reopen,
         name="admission-reopen"),
    path("rollout/combinations/", rollout.combinations, name="combinations"),
    path("rollout/combinations/<str:combination_id>/", rollout.combination, name="combination"),
    path("rollout/combinations/<str:combination_id>/promote/", rollout.combination_promote,
         name="combination-promote"),
    path("rollout/combinations/<str:combination_id>/rollback/", rollout.combination_rollback,
         name="combination-rollback"),
]
