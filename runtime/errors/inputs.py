"""Invalid input: canonical JSON and digests, nesting depth, task specs, ids that name nothing.

Each sits under :class:`~runtime.errors.base.InvalidInputError`: nothing was changed, and only a
corrected input helps.
"""

from __future__ import annotations

from runtime.errors.base import InvalidInputError

# --- canonical JSON, digests, nesting (DESIGN.md section 2.2) -------------------------------


class CanonicalizationError(InvalidInputError):
    """A value cannot be written as RFC 8785 canonical JSON (NaN, a set, bytes, an object)."""

    default_message = "value cannot be serialised as RFC 8785 canonical JSON"
    hint = "only JSON types are allowed (no NaN/Infinity, no sets, bytes or objects)"


class DigestFormatError(InvalidInputError):
    """A digest string is not ``sha256:`` followed by 64 lowercase hex digits."""

    default_message = "digest is not of the form sha256:<64 lowercase hex>"
    hint = "pass the digest exactly as Ratchet printed it: sha256: and 64 lowercase hex digits"


class UnknownDigestKindError(DigestFormatError, ValueError):
    """A digest was requested for a domain tag that is not a ``DigestKind``.

    Also a ``ValueError`` because ``DigestKind(kind)`` raised that before this error existed.
    """

    default_message = "unknown digest kind"
    hint = "use one of the runtime.core.canonical.DigestKind members; the domain tag names what is digested"


class NestingTooDeepError(InvalidInputError, ValueError):
    """Outside input (JSON, TOML) nests arrays/objects deeper than ``runtime.core.nesting``
    allows (DESIGN.md section 2.2). A ``ValueError`` too, so a decoder that already turns bad
    input into its own typed error (not JSON, corrupt checkpoint) does so for this one."""

    default_message = "input is nested deeper than Ratchet reads"
    hint = "nothing Ratchet writes nests this deep; the input is malformed or hostile, retrying will not help"


# --- task specs -------------------------------------------------------------------------------


class TaskSpecError(InvalidInputError):
    """A task spec TOML (or a stored spec) is unreadable or invalid; the message names every bad field."""

    default_message = "task spec is invalid"
    hint = "fix the named fields in the task file; the run was not created"


class TaskSpecUnreadableError(TaskSpecError):
    """The task spec file cannot be opened or read (missing, a directory, no permission)."""

    default_message = "the task spec file cannot be read"
    hint = ("check the path: a relative path is read from the current directory, which the message "
            "names; the run was not created")


class PolicyActionsError(TaskSpecError):
    """A planner that offers the adapter's actions (chat-tools, external) would offer none: the
    policy's ``allowed_actions`` names none of them (``runtime.taskspec.offered_actions``)."""

    default_message = "the policy allows none of the actions the adapter offers"
    hint = "list at least one of the adapter's actions (named above) in policy.allowed_actions; the run was not created"


# --- ids that name nothing ----------------------------------------------------------------------


class RunNotFoundError(InvalidInputError):
    """No run has this id, or its tenant is outside the caller's scope (the two are not told
    apart, so a stranger learns nothing). Context: ``run_id``."""

    default_message = "run not found"
    hint = "check the run id (`manage.py runs` lists the newest runs) and that your account may see its tenant"


class ReviewCaseNotFoundError(InvalidInputError):
    """No review case has this id, or its run's tenant is outside the caller's scope. Context:
    ``case_id``."""

    default_message = "review case not found"
    hint = "check the case id (`manage.py cases list` lists the cases) and that your account may see its tenant"


# --- notifications (DESIGN.md section 6.10) -----------------------------------------------------


class NotificationEndpointError(InvalidInputError):
    """A notification subscription cannot be saved: its owner, channel, target or event kinds are
    not acceptable, or it names an endpoint the user does not own. Context: ``field``."""

    default_message = "notification endpoint is invalid"
    hint = "fix the named field on the notification settings page; nothing was saved"
