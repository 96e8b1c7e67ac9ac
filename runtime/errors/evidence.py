"""Evidence errors besides checkpoints: signatures, the trace chain, attachments, bundles, a run's
stored spec.

Each sits under :class:`~runtime.errors.base.EvidenceError`: something the runtime recorded does
not verify or is missing, so the reader fails closed and keeps the records as found (DESIGN.md
sections 4.1 and 4.8). Context names the key id, run id or digest, never key material.
"""

from __future__ import annotations

from runtime.errors.base import EvidenceError

# --- signatures (DESIGN.md section 4.1, Authenticity) --------------------------------------


class SigningError(EvidenceError):
    """Base for authenticity failures (DESIGN.md section 4.1). Context: ``root``, ``key_id``."""

    default_message = "signature check failed"
    hint = "the signed data is kept as found; check which keyring signed it before trusting it"


class UnknownKeyError(SigningError):
    default_message = "signed with a key id this trust root does not know"
    hint = "add the key to the trust root's keyring if it is legitimate; otherwise treat as forged"


class BadSignatureError(SigningError):
    default_message = "MAC does not verify: the data was altered or signed with another key"
    hint = "the stored copy is corrupt or forged; keep it for inspection and restore from a trusted source"


# --- the trace and attachments --------------------------------------------------------------


class TraceChainError(EvidenceError):
    default_message = "trace hash chain does not verify"
    hint = "an event was edited, inserted or deleted; keep the database for forensics"


class AttachmentError(EvidenceError):
    """A stored attachment is missing, its bytes do not hash to the digest that names it, or the
    digest asked for is malformed. Context: ``digest``."""

    default_message = "attachment content does not match its sha256 digest"
    hint = ("missing or altered bytes: keep the row and restore the blob from a backup; a malformed digest: "
            "pass the one Ratchet printed")


class RunSpecMissingError(EvidenceError):
    """A run's row has no stored task spec (or no target) to open its adapter from; ``missing``
    names the absent ``spec`` keys. Nothing can be observed or decided for it."""

    default_message = "the run has no stored task spec to open its environment from"
    hint = ("its row lost the spec stored when it was created (edited by hand, or written by another tool); restore "
            "the run's `spec` from a backup to review it, or discard a run that died before its first checkpoint "
            "(`manage.py runs --half-created`, `manage.py discard_run`)")


# --- evidence bundles (DESIGN.md section 4.8) ------------------------------------------------


class BundleError(EvidenceError):
    """Base for evidence bundle failures (export or offline verification)."""

    default_message = "evidence bundle error"
    hint = "`manage.py verify_bundle FILE` names every finding; keep the bundle as it is"


class BundleExportError(BundleError):
    """The run's evidence does not verify, so no signed bundle is made for it (signing it would
    vouch for evidence the runtime itself rejects)."""

    default_message = "cannot export an evidence bundle for this run"
    hint = "open the run detail page or `manage.py checkpoint verify RUN_ID` to see what fails"


class ArchiveStorageError(BundleError):
    """An archived bundle could not be written to, or read back intact from, the archive storage
    (DESIGN.md section 4.11). When archiving, the run's rows are kept as they were."""

    default_message = "the archive storage failed"
    hint = ("check the storage named by RATCHET_ARCHIVE_STORAGE (space, permissions, credentials) "
            "and run `manage.py archive` again; a run whose bundle was not stored was not touched")
    retryable = True


class BundleFormatError(BundleError):
    """A bundle file is not JSON or not a bundle object at all."""

    default_message = "not an evidence bundle"
    hint = "pass the JSON file written by `manage.py export_bundle` or the dashboard download"
