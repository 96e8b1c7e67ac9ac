"""Plug-in and verifier errors: loading components by name, pinned versions, the verifier.

Each sits under :class:`~runtime.errors.base.ComponentError` (DESIGN.md sections 5.10 and 6.5).
:class:`PluginNotFoundError` and :class:`PluginLoadError` are also
:class:`~runtime.errors.inputs.TaskSpecError`: a task spec naming a plug-in that cannot be had is
invalid input.
"""

from __future__ import annotations

from runtime.errors.base import ComponentError
from runtime.errors.inputs import TaskSpecError


class PluginError(ComponentError):
    """Base for plug-in failures (DESIGN.md section 5.10). Context names the ``group``
    (``ratchet.planners``, ``ratchet.adapters``, ``ratchet.verifiers``), the ``plugin`` name and,
    where known, the ``entry`` (``module:Attr``) and the ``distribution`` that provided it."""

    default_message = "plug-in failed"
    hint = "the context names the plug-in, its entry and the package that provided it; fix or reinstall that package"


class PluginNotFoundError(PluginError, TaskSpecError):
    """No plug-in of that name is registered in the group (nothing was imported or run). A task
    spec naming one is invalid, so this is also a :class:`TaskSpecError`."""

    default_message = "no plug-in of this name"
    hint = ("install the package that provides it (its entry points register the name), fix the "
            "spelling, or name the code directly with kind = \"python\" and entry = \"module:Attr\"")


class PluginLoadError(PluginError, TaskSpecError):
    """The plug-in's entry point or dotted path names code that cannot be imported, or the object
    it names is not a plug-in (no pydantic ``Options`` model, not callable). Also a
    :class:`TaskSpecError`: the run is not created (or not resumed)."""

    default_message = "plug-in cannot be loaded"
    hint = "check that the package is installed in this environment and that the entry names a plug-in class"


class PluginConstructionError(PluginError):
    """The plug-in raised while being constructed from its options; nothing was executed."""

    default_message = "plug-in raised while being constructed"
    hint = "the message names the exception the plug-in raised; fix the plug-in or its options"


class PluginFailedError(PluginError):
    """A plug-in raised while proposing, observing or verifying; the run is frozen for review
    and nothing was executed for the failed call."""

    default_message = "plug-in raised during a call"
    hint = "read the plug-in's exception in the review case; fix the plug-in, then replan or abort"


class PluginVersionMismatchError(PluginError):
    """A run is resumed under another distribution or version of a plug-in than the one pinned
    when the run was created; the resume is refused before anything is proposed or executed."""

    default_message = "plug-in version differs from the one pinned with the run"
    hint = ("reinstall the pinned version to resume, or start a new run under the new version "
            "(migrating a run to new plug-in versions is not supported yet)")


class CodeDigestMismatchError(PluginVersionMismatchError):
    """A worker's plug-in code (source digest) differs from the code the run was pinned to, with
    the same entry and version: the worker refuses to advance the run instead of executing it
    under different code (DESIGN.md section 8.4). Context: ``run_id``, ``role``."""

    default_message = "this worker's plug-in code differs from the run's pinned combination"
    hint = ("resume the run on a worker of its pinned combination (`manage.py worker --combinations ID`); "
            "a retry on this worker does not help")


class CodeClosureMismatchError(CodeDigestMismatchError):
    """A module the plug-in's entry module imports (directly or not) differs from the code the
    run was pinned to, while the entry module itself is unchanged (DESIGN.md section 8.4).
    Context: ``run_id``, ``role``."""

    default_message = "code the run's plug-in imports changed since the run was pinned"
    hint = ("put back the code the run was pinned to (or resume on a worker that has it); a review "
            "case was opened, so a person decides whether the changed code may drive the run")


# --- verifiers (DESIGN.md section 6.5) --------------------------------------------------------


class VerifierError(ComponentError):
    """The verifier could not reach the reference it compares against (not a failed verdict).
    Deliberately not a :class:`PluginError`, which the engine turns into a frozen run: this one
    propagates, so the step is tried again later."""

    default_message = "verifier could not run"
    retryable = True
    hint = "the verifier could not read what it compares against (named above); the step is tried again later"


class VerifierCommandError(PluginError):
    """The command verifier could not give a verdict (DESIGN.md section 6.5): its command did not
    run, or did not finish. Not a failed verdict: the run is frozen for review (stop reason
    ``verifier_error``) and nothing is executed."""

    default_message = "the verifier's command could not give a verdict"
    hint = ("read the command's output attachment in the review case, fix the task spec or the "
            "environment, then replan or abort")


class VerifierCommandNotFoundError(VerifierCommandError):
    """The verifier's executable does not exist, or is not executable, on the worker's PATH."""

    default_message = "the verifier's command does not exist"
    hint = ("install the executable on the worker, or name it by absolute path in verifier.argv, "
            "then let a reviewer replan the run (the verifier runs again)")


class VerifierCommandTimeoutError(VerifierCommandError):
    """The verifier's command ran past ``verifier.timeout_seconds``; its whole process group was
    killed (SIGKILL) and the output so far is attached by digest (``output_digest``)."""

    default_message = "the verifier's command timed out"
    hint = ("read the partial output attachment; raise verifier.timeout_seconds or fix the hanging "
            "test, then let a reviewer replan the run, or abort it")


class VerifierWorkdirError(VerifierCommandError):
    """The verifier's working directory is outside the run's environment and every directory
    ``verifier.allowed_workdirs`` lists (after resolving symlinks), or does not exist."""

    default_message = "the verifier's working directory is not allowed"
    hint = ("use a directory inside the environment target (verifier.workdir, relative) or list "
            "it in verifier.allowed_workdirs")
