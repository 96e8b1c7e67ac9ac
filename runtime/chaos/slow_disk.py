"""The ``slow-disk`` fault's mount: the campaign's work directory on a FUSE passthrough that can be
made slow (DESIGN.md section 8.8).

``manage.py chaos --faults ...,slow-disk`` mounts before anything runs: the files live in
``<workdir>/.slow-disk/backing``, served at ``<workdir>/disk`` by a FUSE server process of its
own (``runtime.chaos.fuse_passthrough``), and ``<workdir>/disk`` becomes the campaign's work
directory (the var directory, the embedded database, the targets, the logs). The fault creates
``<workdir>/.slow-disk/control`` for a drawn window; while it exists the server delays every
read, write, fsync and metadata change 20-200 ms. Afterwards the command stops the server by
its pid (libfuse unmounts on SIGTERM) and unmounts lazily if the mount outlived it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from runtime.errors import ChaosSetupError

STATE_DIR, MOUNT_DIR = ".slow-disk", "disk"
DELAY_MS = (20.0, 200.0)
"""Per-operation delay while the disk is slow, drawn uniformly by the server (milliseconds)."""
_MOUNT_SECONDS = 20.0
_STOP_SECONDS = 15.0


@dataclass(frozen=True)
class SlowDisk:
    """A mounted slow disk: the server process, the mount point (the campaign's work directory
    from now on) and the control file whose existence makes it slow."""

    proc: subprocess.Popen[bytes]
    mountpoint: Path
    control: Path
    log: Path


def slow_disk_control(workdir: Path) -> Path:
    """The control file of the slow disk mounted at ``workdir`` (``<parent>/.slow-disk/control``)."""
    return workdir.parent / STATE_DIR / "control"


def slow_disk_mounted(workdir: Path) -> bool:
    """Whether ``workdir`` is a slow disk's mount point (a mount with its state directory beside it)."""
    return os.path.ismount(workdir) and slow_disk_control(workdir).parent.is_dir()


def _refuse(reason: str, log: Path | None = None) -> ChaosSetupError:
    tail = ""
    if log is not None and log.is_file():
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        tail = f" (server said: {lines[-1]})" if lines else ""
    return ChaosSetupError(f"slow-disk cannot mount its FUSE passthrough: {reason}{tail}; it needs /dev/fuse, "
                           "libfuse 3 (Debian's fuse3) and the mfusepy package (the test extra)")


def slow_disk_mount(*, workdir: Path, seed: int, delay_ms: tuple[float, float] = DELAY_MS) -> SlowDisk:
    """Start the FUSE server for ``workdir`` and wait until ``<workdir>/disk`` is mounted.

    Args:
        workdir: the directory the operator gave the campaign (must not be a mount of ours yet).
        seed: seeds the server's delays.
        delay_ms: ``(low, high)`` milliseconds per slowed operation.

    Raises:
        ChaosSetupError: no ``/dev/fuse``, no ``mfusepy``, the mount point is already a mount or
            cannot be made a directory, or the server did not mount within 20 s (the message quotes its last log line).
    """
    state, mountpoint = workdir / STATE_DIR, workdir / MOUNT_DIR
    if not os.path.exists("/dev/fuse"):
        raise _refuse("there is no /dev/fuse")
    if importlib.util.find_spec("mfusepy") is None:
        raise _refuse("the Python package mfusepy is not installed")
    if os.path.ismount(mountpoint):
        raise _refuse(f"{mountpoint} is already mounted: unmount it or choose another --workdir")
    try:
        (state / "backing").mkdir(parents=True, exist_ok=True)
        mountpoint.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(f"cannot make its directories in {workdir} ({exc.strerror})") from None
    control, log = state / "control", state / "server.log"
    control.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "runtime.chaos.fuse_passthrough", str(state / "backing"), str(mountpoint),
            "--control", str(control), "--seed", str(seed), "--delay-ms", f"{delay_ms[0]:g},{delay_ms[1]:g}"]
    env = {**os.environ, "PYTHONPATH": str(settings.BASE_DIR)}
    with log.open("ab") as out:
        # A session of its own: a SIGINT or SIGKILL aimed at the campaign's process groups never
        # reaches the disk the campaign stands on.
        proc = subprocess.Popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=env,
                                cwd=settings.BASE_DIR, start_new_session=True)
    disk = SlowDisk(proc=proc, mountpoint=mountpoint, control=control, log=log)
    deadline = time.monotonic() + _MOUNT_SECONDS
    while not os.path.ismount(mountpoint):
        if proc.poll() is not None:
            raise _refuse(f"the server exited with status {proc.returncode}", log)
        if time.monotonic() > deadline:
            slow_disk_unmount(disk=disk)
            raise _refuse(f"nothing was mounted within {_MOUNT_SECONDS:g} s", log)
        time.sleep(0.05)
    return disk


def slow_disk_unmount(*, disk: SlowDisk) -> None:
    """Make the disk fast again, stop its server by pid (SIGTERM, then SIGKILL after 15 s) and
    unmount lazily if the mount outlived it. Never raises: it runs on the way out."""
    disk.control.unlink(missing_ok=True)
    if disk.proc.poll() is None:
        disk.proc.send_signal(signal.SIGTERM)
        try:
            disk.proc.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            disk.proc.kill()
            disk.proc.wait(timeout=_STOP_SECONDS)
    if os.path.ismount(disk.mountpoint):
        tool = ["fusermount3", "-u", "-z"] if shutil.which("fusermount3") else ["umount", "-l"]
        subprocess.run([*tool, str(disk.mountpoint)], check=False, capture_output=True, timeout=60)


def slow_disk_window(*, workdir: Path, alive: Callable[[], bool], seconds: float) -> bool:
    """Make the disk under ``workdir`` slow for ``seconds``, then fast again.

    Args:
        workdir: the slow disk's mount point.
        alive: returns whether the run's holder still runs.
        seconds: the window.

    Returns:
        Whether it landed: a probe write and fsync through the mount took at least the shortest
        delay (the server is slowing what reaches it) and the holder was alive meanwhile.

    Raises:
        ChaosSetupError: ``workdir`` is not a slow disk's mount point.
    """
    if not slow_disk_mounted(workdir):
        raise ChaosSetupError("slow-disk needs the work directory on the slow mount the chaos command makes")
    control = slow_disk_control(workdir)
    probe = workdir / f".chaos-probe-{os.getpid()}"
    started = time.monotonic()
    control.touch()
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"\0")
            os.fsync(fd)
        finally:
            os.close(fd)
        slowed = time.monotonic() - started >= DELAY_MS[0] / 1000.0
        landed = slowed and alive()
        time.sleep(max(0.0, seconds - (time.monotonic() - started)))
        return landed
    finally:
        control.unlink(missing_ok=True)
        probe.unlink(missing_ok=True)
