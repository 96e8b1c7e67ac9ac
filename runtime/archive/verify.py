"""Verifying an archived run's bundle with public keys only (DESIGN.md sections 4.8 and 4.10)."""

from __future__ import annotations

from pathlib import Path

from runtime.archive.bundle_store import bundle_fetch
from runtime.bundles.verification import bundle_load, bundle_trust, bundle_verify
from runtime.errors import RunArchiveRefusedError, RunNotFoundError
from runtime.models import Run


def archived_bundle_findings(*, run_id: str, public_keys: Path | None = None) -> list[str]:
    """Fetch the archived bundle of ``run_id`` by its recorded location, check its digest and
    verify it offline (``runtime.bundles.verification.bundle_verify``) with public keys only.

    Args:
        run_id: an archived run.
        public_keys: a public-key file (``manage.py keys export-public``); None: the configured
            keys' public halves.

    Returns:
        The findings (empty: the bundle verifies).

    Raises:
        RunNotFoundError: no such run.
        RunArchiveRefusedError: the run is not archived.
        ArchiveStorageError: the bundle is missing or does not hash to its recorded digest.
        BundleFormatError / KeyringError: the bundle or the key file cannot be read.
    """
    run = Run.objects.filter(run_id=run_id).values("archive_location", "archive_digest").first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    if not run["archive_location"]:
        raise RunArchiveRefusedError("the run is not archived", run_id=run_id)
    data = bundle_fetch(name=run["archive_location"], digest=run["archive_digest"])
    bundle = bundle_load(data)
    if (bundle.get("run") or {}).get("run_id") != run_id:
        return [f"the archived bundle is of another run: {(bundle.get('run') or {}).get('run_id')!r}"]
    return bundle_verify(bundle, None, trust=bundle_trust(public_keys=public_keys, checkpoint=None))
