"""Verifiers: does the environment now hold what the task asked for? (DESIGN.md section 5.10)

:mod:`runtime.verifiers.base` is the plug-in protocol (``Verifier``, ``VerifierContext``,
``VerifierOutcome``), re-exported here because plug-in authors import these names from
``runtime.verifiers``; :mod:`runtime.verifiers.builtin` holds the built-in kinds (``always``,
``files-equal``, ``tree-equals-source``) and ``verify``, which runs the one a spec names;
:mod:`runtime.verifiers.command` runs a test command in the environment.
"""

from runtime.verifiers.base import Verifier, VerifierContext, VerifierOutcome

__all__ = ("Verifier", "VerifierContext", "VerifierOutcome")
