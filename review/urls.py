"""Dashboard URLs. Every view here is wrapped in ``review.permissions.require_perm``; the
authorization matrix test (``tests/review/test_authorization_matrix.py``) fails for a new URL
that is missing from it."""

from django.urls import path

from review import views, views_approvals, views_cases, views_passkeys, views_rollout, views_tokens

app_name = "review"
urlpatterns = [
    path("", views.runs_list, name="runs"),
    path("runs/<str:run_id>/", views.run_detail, name="run"),
    path("runs/<str:run_id>/cancel/", views_approvals.run_cancel, name="run-cancel"),
    path("runs/<str:run_id>/bundle/", views.run_bundle, name="run-bundle"),
    path("runs/<str:run_id>/tokens/", views_tokens.run_tokens, name="run-tokens"),
    path("attachments/<str:digest>/", views.attachment_download, name="attachment"),
    path("trace/", views.trace_browser, name="trace"),
    path("health/", views.health, name="health"),
    path("workers/", views.workers, name="workers"),
    path("approvals/", views_approvals.approvals, name="approvals"),
    path("approvals/<str:run_id>/approve/", views_approvals.approval_approve, name="approve"),
    path("approvals/<str:run_id>/refresh/", views_approvals.approval_refresh, name="refresh"),
    path("approvals/<str:run_id>/deny/", views_approvals.approval_deny, name="deny"),
    path("cases/", views_cases.cases, name="cases"),
    path("cases/<str:case_id>/", views_cases.case_detail, name="case"),
    path("cases/<str:case_id>/decide/", views_cases.case_decide, name="decide"),
    path("cases/<str:case_id>/passkey/options/", views_passkeys.passkey_decision_options,
         name="decide-passkey-options"),
    path("cases/<str:case_id>/passkey/", views_passkeys.passkey_decide, name="decide-passkey"),
    path("passkeys/", views_passkeys.passkeys, name="passkeys"),
    path("passkeys/options/", views_passkeys.passkey_register_options, name="passkey-options"),
    path("passkeys/register/", views_passkeys.passkey_register, name="passkey-register"),
    path("rollout/", views_rollout.rollout, name="rollout"),
    path("rollout/admission/<str:tenant_id>/<str:task_id>/", views_rollout.admission_scope, name="admission-scope"),
    path("rollout/admission/<str:tenant_id>/<str:task_id>/threshold/", views_rollout.admission_threshold,
         name="admission-threshold"),
    path("rollout/admission/<str:tenant_id>/<str:task_id>/reopen/", views_rollout.admission_reopen,
         name="admission-reopen"),
    path("rollout/combinations/", views_rollout.combinations, name="combinations"),
    path("rollout/combinations/<str:combination_id>/", views_rollout.combination, name="combination"),
    path("rollout/combinations/<str:combination_id>/promote/", views_rollout.combination_promote,
         name="combination-promote"),
    path("rollout/combinations/<str:combination_id>/rollback/", views_rollout.combination_rollback,
         name="combination-rollback"),
]
