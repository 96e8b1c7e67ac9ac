"""Dashboard test setup: a checkpoint keyring in the environment, the three roles, and personas.

Personas (STYLE.md rule 10): ``operator``, ``reviewer`` and ``admin`` are in their groups; a
``stranger`` is signed in but in no group; ``anonymous`` is not signed in.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.test import Client

from review.roles import roles_sync
from runtime.core.signing import Keyring, SecretKey, TrustRoot
from tests.helpers.keys import TestKey

PERSONAS = ("anonymous", "stranger", "operator", "reviewer", "admin")
PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def checkpoint_keyring(monkeypatch: pytest.MonkeyPatch) -> Keyring:
    """A fresh checkpoint key, configured the way production does it (RATCHET_CHECKPOINT_KEYS)."""
    key = SecretKey.generate()
    monkeypatch.setenv("RATCHET_CHECKPOINT_KEYS", f"test-k1:{key.to_b64()}")
    return Keyring(TrustRoot.CHECKPOINT, {"test-k1": key}, "test-k1")


@pytest.fixture
def all_root_keys(
    checkpoint_keyring: Keyring, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> dict[str, TestKey]:
    """Keys for every trust root (``ratchet_keys``: private and public keys of the Ed25519
    roots, so this process exports bundles), while the checkpoint root stays
    ``checkpoint_keyring``'s (``test-k1``), which the rows are sealed with."""
    checkpoint_spec = os.environ["RATCHET_CHECKPOINT_KEYS"]
    keys: dict[str, TestKey] = request.getfixturevalue("ratchet_keys")
    monkeypatch.setenv("RATCHET_CHECKPOINT_KEYS", checkpoint_spec)
    return keys


@pytest.fixture(autouse=True)
def _fast_tests(settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MEDIA_ROOT = str(tmp_path / "media")
    cache.clear()  # verdicts the pages keep (chain, checkpoint rows) never leak between tests


@pytest.fixture
def roles(db: None) -> dict[str, list[str]]:
    return roles_sync()


@pytest.fixture
def personas(roles: dict[str, list[str]], django_user_model) -> dict[str, object]:  # type: ignore[no-untyped-def]
    users: dict[str, object] = {}
    for name in ("stranger", "operator", "reviewer", "admin"):
        user = django_user_model.objects.create_user(username=name, password=PASSWORD)
        if name != "stranger":
            user.groups.add(Group.objects.get(name=name))
        users[name] = user
    return users


@pytest.fixture
def client_for(personas: dict[str, object]) -> Callable[..., Client]:
    """``client_for("operator")``: a Client signed in as that persona (``anonymous``: not)."""

    def make(name: str, **kwargs: object) -> Client:
        client = Client(**kwargs)
        if name != "anonymous":
            client.force_login(personas[name])
        return client

    return make


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run ids the runtime handed to the worker queue (``runtime.workers.dispatch.run_enqueue``), recorded
    instead of published: these stories check what the dashboard changed, not a worker."""
    import runtime.workers.dispatch

    calls: list[str] = []
    monkeypatch.setattr(runtime.workers.dispatch, "run_enqueue", lambda *, run_id: calls.append(run_id))
    return calls


@pytest.fixture
def login_limits(settings) -> None:  # type: ignore[no-untyped-def]
    """Small sign-in throttle limits (review.throttle): 3 per username or device, 10 per address,
    a 600 s window, 300 s lockouts, 3,600 s known devices."""
    settings.RATCHET_LOGIN_MAX_FAILURES = 3
    settings.RATCHET_LOGIN_MAX_FAILURES_PER_IP = 10
    settings.RATCHET_LOGIN_WINDOW_SECONDS = 600
    settings.RATCHET_LOGIN_LOCKOUT_SECONDS = 300
    settings.RATCHET_LOGIN_DEVICE_SECONDS = 3600
