"""What a workspace holds: the scan behind its observation (DESIGN.md sections 3 and 5).

The fingerprint is a typed digest (``DigestKind.ENVIRONMENT``) over ``{relative path: {sha256,
executable}}`` for every regular file outside the adapter's own directory (symlinks are recorded
by their target, never followed; empty directories do not count). An out-of-band edit changes
it, while the workspace's version only moves through the adapter: exactly the "same version,
different content" drift the engine must catch. Imports nothing from Django.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from runtime.adapters.file_diff import git_mode
from runtime.adapters.workspace.files import DIR_FLAGS, UNREADABLE, Entry, display_name, entry_at
from runtime.core.canonical import DigestKind, digest

MAX_LISTING_BYTES = 64 * 1024


def workspace_scan(root: Path, *, skip: str) -> dict[str, Entry]:
    """Every entry under ``root`` by relative path, except the top-level directory ``skip``.

    Args:
        root: the workspace directory.
        skip: the adapter's own top-level directory (``.ratchet``), left out of the content.
    """
    entries: dict[str, Entry] = {}
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _scan_dir(root_fd, "", entries, skip=skip)
    finally:
        os.close(root_fd)
    return entries


def _scan_dir(dir_fd: int, prefix: str, entries: dict[str, Entry], *, skip: str) -> None:
    with os.scandir(dir_fd) as it:
        names = sorted(entry.name for entry in it)
    for name in names:
        if not prefix and name == skip:
            continue
        rel = prefix + display_name(name)
        entry = entry_at(dir_fd, name)
        if entry is None:  # vanished while scanning
            continue
        if "directory" in entry:
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                entries[rel] = UNREADABLE
                continue
            try:
                _scan_dir(child, rel + "/", entries, skip=skip)
            finally:
                os.close(child)
        else:
            entries[rel] = entry


def workspace_fingerprint(entries: dict[str, Entry]) -> str:
    """The ``sha256:`` environment digest of scanned ``entries``."""
    return digest(DigestKind.ENVIRONMENT, {"files": entries})


def workspace_listing(entries: dict[str, Entry]) -> bytes:
    """One ``<mode> <sha256> <path>`` line per entry, cut at :data:`MAX_LISTING_BYTES`."""
    lines = []
    for path in sorted(entries):
        entry = entries[path]
        if "sha256" in entry:
            lines.append(f"{git_mode(entry['executable'])} {entry['sha256']} {path}\n")
        elif "symlink" in entry:
            lines.append(f"120000 -> {entry['symlink']} {path}\n")
        else:
            lines.append(f"other {json.dumps(entry, sort_keys=True)} {path}\n")
    out = bytearray()
    for index, line in enumerate(lines):
        data = line.encode("utf-8")
        if len(out) + len(data) > MAX_LISTING_BYTES:
            out += f"... truncated: {len(lines) - index} more entries\n".encode()
            break
        out += data
    return bytes(out)
