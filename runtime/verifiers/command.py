"""The command verifier: run a test command in the environment; exit code 0 passes.

``[verifier] kind = "command"`` (DESIGN.md section 6.5) does what SWE-bench's harness does with a
task's tests: it runs ``argv`` (an argument list, never a shell) in a working directory inside
the run's environment target (or one ``allowed_workdirs`` lists), with a timeout in seconds, a
scrubbed environment and a bounded output, and stores the combined stdout and stderr as a
content-addressed attachment through the context's ``put_blob``. The verdict names the output
digest and the environment version it ran against; the engine records it in the checkpoint's
``VerifierResult`` with that version's fingerprint, and re-observes the environment afterwards
so that a command that changed what it verified cannot complete the run.

The command runs as the worker's user: this is not a sandbox (SWE-bench runs its harness in a
container; run the worker in one when the command is not trusted). What it does not get is
Ratchet's configuration: only a few variables (``PATH``, ``HOME``, locale, ``TZ``, ``TMPDIR``)
are inherited, plus the ones the spec sets (``env``) or passes by name (``pass_env``); names
that are Ratchet's (``RATCHET_*``, ``DJANGO_*``, ``CELERY_*``, ``DATABASE_URL``), look like
secrets (``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``CREDENTIAL``) or that the spec names as
a plug-in's credential variable (an option ending in ``_env``) are never passed.

Errors (no verdict; the engine freezes the run with stop reason ``verifier_error``):
``VerifierCommandNotFoundError``, ``VerifierCommandTimeoutError`` (the whole process group is
killed, the output so far attached), ``VerifierWorkdirError``. Framework-free: nothing here
imports Django.
"""

from __future__ import annotations

import os
import re
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field, StringConstraints

from runtime.core.canonical import digest_bytes
from runtime.errors import (
    VerifierCommandError,
    VerifierCommandNotFoundError,
    VerifierCommandTimeoutError,
    VerifierWorkdirError,
)
from runtime.plugins.registry import VERIFIERS
from runtime.taskspec.models import Spec, unique
from runtime.verifiers.base import VerifierContext, VerifierOutcome

if TYPE_CHECKING:
    from runtime.adapters.base import Observation

KIND = "command"

INHERITED_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
"""What the command inherits from the worker's environment without being asked."""

FIXED_VARIABLES = {"PYTHONDONTWRITEBYTECODE": "1"}
"""Set for every command (the spec's ``env`` may override): a Python test run must not leave
``__pycache__`` in the environment it verifies, or the run's environment has changed."""

_REFUSED_NAME = re.compile(r"^(RATCHET_|DJANGO_|CELERY_)|^DATABASE_URL$|KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL",
                           re.IGNORECASE)
"""Variable names never given to a command: Ratchet's settings and anything named like a secret."""

POLL_SECONDS = 0.05
"""How often the output loop checks whether the command has exited."""

DRAIN_GRACE_SECONDS = 1.0
"""After the command's group is killed, how long the rest of its output may take to arrive."""


def _check_name(name: str) -> str:
    if _REFUSED_NAME.search(name):
        raise ValueError(f"{name!r:.80} is Ratchet's or names a secret; a verifier command never gets it")
    return name


def _check_argv(argv: list[str]) -> list[str]:
    if not argv[0]:
        raise ValueError("argv[0], the program, is empty")
    return argv


def _check_arg(value: str) -> str:
    if "\x00" in value:
        raise ValueError("an argument cannot contain a NUL byte")
    return value


EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"), AfterValidator(_check_name)]
Arg = Annotated[str, StringConstraints(max_length=4096), AfterValidator(_check_arg)]
DirName = Annotated[str, StringConstraints(min_length=1, max_length=4096), AfterValidator(_check_arg)]


class CommandVerifierOptions(Spec):
    """Options of ``[verifier] kind = "command"``.

    Attributes:
        argv: the program and its arguments (no shell: ``["python3", "-m", "pytest", "-q"]``);
            a bare program name is looked up on the inherited ``PATH``.
        workdir: where it runs: relative to the environment target (default ``"."``, the target
            itself) or absolute; after resolving symlinks it must be inside the target or one
            of ``allowed_workdirs``.
        allowed_workdirs: further directories it may run in (absolute, or relative to the task
            file's directory).
        timeout_seconds: wall time before the whole process group is killed (seconds).
        max_output_bytes: output kept (bytes): the first and last halves when it is longer.
        env: variables set for the command (values are stored with the spec: no secrets).
        pass_env: names of worker variables passed through unchanged.
    """

    argv: Annotated[list[Arg], Field(min_length=1, max_length=256), AfterValidator(_check_argv)]
    workdir: DirName = "."
    allowed_workdirs: Annotated[list[DirName], Field(max_length=32), AfterValidator(unique)] = Field(
        default_factory=list)
    timeout_seconds: Annotated[float, Field(gt=0, le=86_400, allow_inf_nan=False)] = 600.0
    max_output_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    env: dict[EnvName, Arg] = Field(default_factory=dict)
    pass_env: Annotated[list[EnvName], Field(max_length=64), AfterValidator(unique)] = Field(default_factory=list)


class OutputBuffer:
    """Combined output kept within ``limit`` bytes: the first half and the last half.

    A test runner prints its summary last, so the tail matters as much as the head; what is
    dropped in between is counted and marked in the kept bytes.
    """

    def __init__(self, limit: int) -> None:
        self.head_cap = limit // 2
        self.tail_cap = limit - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        """Append ``chunk`` (bytes as read from the pipe)."""
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def dropped(self) -> int:
        """Bytes of output not kept."""
        return self.total - len(self.head) - len(self.tail)

    def render(self) -> bytes:
        """The kept bytes, with a marker where output was dropped."""
        if not self.dropped:
            return bytes(self.head + self.tail)
        marker = f"\n[ratchet: {self.dropped} bytes of output not kept]\n".encode()
        return bytes(self.head) + marker + bytes(self.tail)


def _inside(root: str, path: str) -> bool:
    real_root = os.path.realpath(root)
    return os.path.commonpath([real_root, path]) == real_root


def _credential_variables(context: VerifierContext) -> set[str]:
    """Variables the spec names as a plug-in's credential (an option ending in ``_env``)."""
    names: set[str] = set()
    spec = context.spec
    for options in (spec.environment.options, spec.planner.options_json()):
        for key, value in options.items():
            if key.endswith("_env") and isinstance(value, str):
                names.add(value)
    return names


class CommandVerifier:
    """``kind = "command"``: run ``argv`` in the environment; exit code 0 passes (section 6.5)."""

    Options = CommandVerifierOptions

    def __init__(self, *, options: CommandVerifierOptions, context: VerifierContext) -> None:
        self.options = options
        self.base_dir = context.base_dir
        self.put_blob: Callable[[bytes], str] | None = context.put_blob
        self.withheld = _credential_variables(context)

    # -- what the command gets -----------------------------------------------------------------

    def workdir(self, target: Path) -> Path:
        """The resolved working directory.

        Raises:
            VerifierWorkdirError: outside the target and every allowed directory, or missing.
        """
        roots = [str(target)]
        for entry in self.options.allowed_workdirs:
            path = Path(entry)
            if not path.is_absolute() and self.base_dir is not None:
                path = Path(self.base_dir) / path
            roots.append(str(path))
        wanted = Path(self.options.workdir)
        real = os.path.realpath(wanted if wanted.is_absolute() else target / wanted)
        if not any(_inside(root, real) for root in roots):
            raise VerifierWorkdirError(
                f"verifier.workdir {self.options.workdir!r:.200} resolves outside the environment "
                "target and every verifier.allowed_workdirs entry; nothing was run",
                group=VERIFIERS, plugin=KIND)
        if not os.path.isdir(real):
            raise VerifierWorkdirError(f"verifier.workdir {self.options.workdir!r:.200} is not a directory; "
                                       "nothing was run", group=VERIFIERS, plugin=KIND)
        return Path(real)

    def environment(self, worker_env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The command's variables: the inherited few, the fixed ones, ``pass_env``, ``env``."""
        source = os.environ if worker_env is None else worker_env
        env = {name: source[name] for name in INHERITED_VARIABLES if name in source}
        env.update(FIXED_VARIABLES)
        env.update({name: source[name] for name in self.options.pass_env if name in source})
        env.update(self.options.env)
        # Checked again here, not only by the options model: a stored spec may predate a rule.
        return {k: v for k, v in env.items() if not _REFUSED_NAME.search(k) and k not in self.withheld}

    # -- running it ----------------------------------------------------------------------------

    def _store(self, data: bytes) -> str:
        return self.put_blob(data) if self.put_blob is not None else digest_bytes(data)

    def verify(self, *, observation: Observation, target: Path,
               planner_state: Mapping[str, Any] | None) -> VerifierOutcome:
        """Run the command once against ``target`` as observed in ``observation``.

        Returns:
            A pass exactly when the command exited with code 0; the detail names the command,
            the exit code, the elapsed seconds, the environment version and the output digest.

        Raises:
            VerifierWorkdirError: the working directory is outside the target and every allowed
                directory, or missing.
            VerifierCommandNotFoundError: the command is not on the path.
            VerifierCommandTimeoutError: the command outlived ``timeout_seconds``.
            VerifierCommandError: the exit code was lost (never read as a pass).
        """
        argv = list(self.options.argv)
        shown = shlex.join(argv)[:300]
        cwd = self.workdir(Path(target))
        started = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=self.environment(), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True)
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise VerifierCommandNotFoundError(
                f"verifier command {argv[0]!r:.200} cannot be executed ({exc.strerror}); nothing was run",
                group=VERIFIERS, plugin=KIND) from None
        buffer = OutputBuffer(self.options.max_output_bytes)
        ending = _collect(proc, buffer, timeout=self.options.timeout_seconds)
        elapsed = time.monotonic() - started
        digest = self._store(buffer.render())
        kept = f"{buffer.total} bytes" + (f", {buffer.dropped} not kept" if buffer.dropped else "")
        if ending == "lost":  # never read a lost exit status as a pass
            raise VerifierCommandError(
                f"verifier command {shown} ended but its exit code was lost (another part of the worker "
                f"reaped it); output {digest} ({kept})", group=VERIFIERS, plugin=KIND, output_digest=digest)
        if ending == "timed_out":
            raise VerifierCommandTimeoutError(
                f"verifier command {shown} ran past {self.options.timeout_seconds:g} s at environment "
                f"version {observation.version}; its process group was killed; output {digest} ({kept})",
                group=VERIFIERS, plugin=KIND, output_digest=digest)
        code = proc.returncode
        how = f"exited {code}" if code >= 0 else f"was killed by signal {-code}"
        return VerifierOutcome(
            passed=code == 0,
            detail=f"command {shown} {how} after {elapsed:.2f} s at environment version "
                   f"{observation.version}; output {digest} ({kept})",
            output_digest=digest,
        )


def _exited(pid: int) -> bool | None:
    """Whether the child has exited, without reaping it: its pid, and so its process group id,
    cannot be reused until it is reaped, which makes the group kill below safe. None: someone
    else reaped it already (then its group id may belong to another process: never kill it)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    return info is not None


def _drain(fd: int, buffer: OutputBuffer, budget: int = 4 * 1024 * 1024) -> bool:
    """Read what the pipe has now (at most ``budget`` bytes); False at end of file."""
    while budget > 0:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        buffer.add(chunk)
        budget -= len(chunk)
    return True


def _collect(proc: subprocess.Popen[bytes], buffer: OutputBuffer, *, timeout: float) -> str:
    """Read the command's output until it exits or ``timeout`` seconds pass, then kill its
    whole process group (stragglers it left behind too) and reap it.

    Returns:
        ``"exited"``, ``"timed_out"``, or ``"lost"`` when something else in this process reaped
        the child first, so its exit code is unknown.
    """
    stdout = proc.stdout
    if stdout is None:  # pragma: no cover - Popen was given stdout=PIPE
        raise ValueError("the command has no output pipe")
    fd = stdout.fileno()
    os.set_blocking(fd, False)
    deadline = time.monotonic() + timeout
    timed_out = False
    is_open = True
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while (exited := _exited(proc.pid)) is False:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if is_open:
                if selector.select(min(remaining, POLL_SECONDS)):
                    is_open = _drain(fd, buffer)
            else:
                time.sleep(min(remaining, POLL_SECONDS))
        if exited is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass  # the group is already empty
        proc.wait()
        grace = time.monotonic() + DRAIN_GRACE_SECONDS
        while is_open and time.monotonic() < grace:
            if selector.select(POLL_SECONDS):
                is_open = _drain(fd, buffer)
    stdout.close()
    return "timed_out" if timed_out else "exited" if exited is not None else "lost"
