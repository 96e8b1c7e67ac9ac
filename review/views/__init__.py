"""The dashboard's views, one module per page family. A new page goes in the module of its family:

=================  ==============================================================================
module             pages
=================  ==============================================================================
``runs``           the runs list, one run, cancelling a run, its evidence bundle, attachments
``trace``          the trace evidence browser across runs
``approvals``      the approvals queue; approve, refresh, deny
``cases``          review cases, one case, a decision signed with the password
``passkeys``       registering passkeys, a decision signed with a passkey
``tokens``         a run's gateway tokens
``rollout``        admission scopes and thresholds, version combinations (admins)
``health``         rollout health, the workers
``auth``           sign-in, sign-out (mounted by ``runtime.project.urls``)
=================  ==============================================================================

A page that fits no family gets a module of its own, named for it, listed here; its URL goes in
``review/urls.py`` and in the authorization matrix (``tests/review/test_authorization_matrix.py``).

Conventions:

* **The permission is checked in the view**: every view is wrapped in
  ``review.permissions.require_perm`` (outermost), so an htmx fragment gets exactly its page's
  check, then in the HTTP-method decorator; a run or case outside the user's tenants is a 404
  (``review.scope``; DESIGN.md section 6.6), checked before anything about it is read.
* **One function renders a page and its htmx partials**: ``common.page_render`` answers an htmx
  swap with ``template#partial`` of the same template; live pages take their poll context from
  ``common.poll_context`` (204 when nothing changed).
* **Services do the work**: a view parses its input (a form; ``review.filters`` for filter query
  strings), calls one ``review.queries`` function to read or one runtime service to change
  something, as the signed-in user, and renders. It never changes runtime rows and decides no
  rule a service can decide on the state it restores (who may replace an approval is
  ``approval_grant``'s ``may_refresh``).
* **Errors have one mapping**: ``errors.action_failed`` turns the runtime's typed errors into
  the message and 303 of an action, ``errors.not_found_is_404`` a missing run, case or
  combination into a 404. A change is a CSRF-protected POST answered with a 303
  (post/redirect/get; ``common.see_other``).
* Each view function stays under about 30 lines; longer work goes to a private helper beside it.
"""
