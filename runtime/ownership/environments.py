"""Registered environments: one fencing-token counter per environment instance, and the location
and identity a byte copy does not carry (DESIGN.md sections 4.6 and 5.4).

Fencing tokens are issued here, not per run: every lease on any run acting on an instance advances
that instance's one counter in the lease transaction, so a new run or a new lease always holds a
newer token than anything that wrote to the environment before. The counter is an ``UPDATE``
with ``GREATEST(token, floor) + 1`` followed by a read of the row inside the same transaction: the
update holds the row lock (PostgreSQL) or the write lock (SQLite) until commit, so two processes
taking leases on one environment can never be handed the same token.

A filesystem environment (``workspace``, ``git``) is also bound to where it lives: the real path
of its directory and the directory's ``<device>:<inode>``, recorded when the instance is first
registered and compared on every observation (:class:`BoundAdapter`). ``cp -a`` carries the
instance id file along but not the inode, so a copy put in place of the original, or a copy
elsewhere claiming the same instance id, fails closed with :class:`EnvironmentIdentityError`.
"""

from __future__ import annotations

import os
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Max, Value
from django.db.models.functions import Greatest

from runtime.adapters.base import Adapter
from runtime.adapters.fence import adapter_fence_advance
from runtime.errors import EngineError, EnvironmentIdentityError
from runtime.models import EnvironmentRegistration, Run

FILESYSTEM_KINDS = ("workspace", "git")
"""Adapter kinds whose target is the environment's own directory, so location binding applies."""


def environment_location(target: str | os.PathLike[str]) -> tuple[str, str]:
    """``(real path, "<st_dev>:<st_ino>")`` of the directory ``target``.

    Raises:
        OSError: ``target`` cannot be stat'ed.
    """
    real = os.path.realpath(target)
    st = os.stat(real)
    return real, f"{st.st_dev}:{st.st_ino}"


def _location_or_blank(kind: str, target: str | None) -> tuple[str, str]:
    if kind not in FILESYSTEM_KINDS or not target:
        return "", ""
    try:
        return environment_location(target)
    except OSError:
        return "", ""


def environment_fence_next_txn(*, run_id: str, instance_id: str, floor: int) -> int:
    """Advance the instance's fencing token past ``floor`` and return it; call inside the lease
    transaction (DESIGN.md section 4.6).

    Registers the instance on first use: the counter starts at the highest lease version any
    run on it already holds (so tokens stay monotonic across the upgrade), and a filesystem
    environment's location and identity are recorded from the run's stored target.

    Args:
        run_id: the run taking the lease (its stored spec names kind and target).
        instance_id: the run's environment instance id.
        floor: the run's current lease version; the new token is strictly greater.

    Raises:
        EngineError: the registration row vanished inside the transaction (fail closed).
    """
    if not EnvironmentRegistration.objects.filter(instance_id=instance_id).exists():
        spec = Run.objects.filter(run_id=run_id).values_list("spec", flat=True).first() or {}
        kind = str((spec.get("initial") or {}).get("kind", ""))
        location, identity = _location_or_blank(kind, spec.get("target"))
        seed = Run.objects.filter(environment_instance_id=instance_id).aggregate(m=Max("lease_version"))["m"] or 0
        try:
            with transaction.atomic():  # a savepoint: a concurrent registration wins, ours is dropped
                EnvironmentRegistration.objects.create(instance_id=instance_id, fencing_token=seed,
                                                       location=location, identity=identity)
        except IntegrityError:
            pass
    updated = EnvironmentRegistration.objects.filter(instance_id=instance_id).update(
        fencing_token=Greatest(F("fencing_token"), Value(floor)) + 1)
    if updated != 1:
        raise EngineError("the environment's fence row is missing", run_id=run_id, instance_id=instance_id)
    return int(EnvironmentRegistration.objects.filter(instance_id=instance_id)
               .values_list("fencing_token", flat=True).get())


def environment_binding(*, instance_id: str, kind: str, target: str | os.PathLike[str]) -> tuple[str, str] | None:
    """The registered ``(location, identity)`` of a filesystem environment, registering it now
    when no lease ever did (runs from before registration existed); None for other kinds.

    Raises:
        EnvironmentIdentityError: the target cannot be stat'ed.
    """
    if kind not in FILESYSTEM_KINDS:
        return None
    row = EnvironmentRegistration.objects.filter(instance_id=instance_id).values("location", "identity").first()
    if row is not None and row["location"]:
        return row["location"], row["identity"]
    try:
        location, identity = environment_location(target)
    except OSError:
        raise EnvironmentIdentityError("the environment directory cannot be found",
                                       instance_id=instance_id, location=str(target)) from None
    if row is None:
        EnvironmentRegistration.objects.get_or_create(instance_id=instance_id,
                                                      defaults={"location": location, "identity": identity})
    else:
        EnvironmentRegistration.objects.filter(instance_id=instance_id, location="").update(
            location=location, identity=identity)
    row = EnvironmentRegistration.objects.filter(instance_id=instance_id).values("location", "identity").get()
    return row["location"], row["identity"]


def environment_check(*, instance_id: str, target: str | os.PathLike[str], binding: tuple[str, str]) -> None:
    """Refuse unless ``target`` is the registered directory (DESIGN.md section 5.4).

    Args:
        instance_id: the registered instance.
        target: the directory the run acts on.
        binding: ``(location, identity)`` from :func:`environment_binding`.

    Raises:
        EnvironmentIdentityError: another location, another directory at the same location
            (a copy or a restore put in place of the original), or no directory at all.
    """
    try:
        location, identity = environment_location(target)
    except OSError:
        raise EnvironmentIdentityError("the environment directory cannot be found",
                                       instance_id=instance_id, location=str(target)) from None
    if location != binding[0]:
        raise EnvironmentIdentityError("the environment instance is registered at another location",
                                       instance_id=instance_id, location=location, registered_location=binding[0])
    if identity != binding[1]:
        raise EnvironmentIdentityError(
            "the directory at the registered location is not the registered one (a byte copy or a restore)",
            instance_id=instance_id, location=location)


class BoundAdapter:
    """The adapter a lease holder uses: every observation, look-up and write first checks the
    environment's registered location and identity (DESIGN.md section 5.4), and every look-up by
    key first raises the adapter's fence to the holder's token (section 4.6), so an older holder
    that already passed its lease check cannot write behind the look-up. Everything else is
    forwarded.

    Args:
        inner: the adapter.
        instance_id: the instance the run is bound to.
        target: the directory the run acts on.
        binding: ``(location, identity)`` from :func:`environment_binding`, or None (not a
            filesystem environment: nothing to compare).
        fencing_token: the holder's fencing token (its lease version).
    """

    def __init__(self, inner: Adapter, *, instance_id: str, target: str | os.PathLike[str],
                 binding: tuple[str, str] | None, fencing_token: int) -> None:
        self._inner = inner
        self._instance_id = instance_id
        self._target = target
        self._binding = binding
        self._token = fencing_token

    def _check(self) -> None:
        if self._binding is not None:
            environment_check(instance_id=self._instance_id, target=self._target, binding=self._binding)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def observe(self) -> Any:
        self._check()
        return self._inner.observe()

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        return self._inner.execute(*args, **kwargs)

    def lookup_receipt(self, idempotency_key: str) -> Any:
        self._check()
        adapter_fence_advance(self._inner, self._token)
        return self._inner.lookup_receipt(idempotency_key)

    def receipts(self) -> Any:
        self._check()
        return self._inner.receipts()

    def with_fencing_token(self, fencing_token: int) -> BoundAdapter:
        """The same adapter and binding for a newer lease of the same holder (the gateway's
        reused session, DESIGN.md section 5.12)."""
        return BoundAdapter(self._inner, instance_id=self._instance_id, target=self._target,
                            binding=self._binding, fencing_token=fencing_token)


def adapter_bind(adapter: Adapter, *, instance_id: str, kind: str, target: str | os.PathLike[str],
                 fencing_token: int) -> Adapter:
    """``adapter`` wrapped in a :class:`BoundAdapter` for a lease holder with ``fencing_token``.

    Raises:
        EnvironmentIdentityError: the target cannot be stat'ed on first registration.
    """
    binding = environment_binding(instance_id=instance_id, kind=kind, target=target)
    return BoundAdapter(adapter, instance_id=instance_id, target=target, binding=binding,  # type: ignore[return-value]
                        fencing_token=fencing_token)
