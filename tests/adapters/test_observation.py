"""The engine checkpoints an observation as an EnvironmentRef with its small evidence
attachments stored content-addressed (DESIGN.md section 3: environment, never a pretend copy)."""

from __future__ import annotations

from runtime.core.canonical import digest_bytes
from tests.adapters.support import Env


def test_it_becomes_an_environment_ref(env: Env) -> None:
    obs = env.adapter.observe()

    ref = obs.ref(adapter_generation=3, observation_version=5,
                  attachment_digests=list(obs.attachment_digests().values()))

    assert (ref.adapter_kind, ref.instance_id, ref.version, ref.state_fingerprint) == (
        env.kind, obs.instance_id, obs.version, obs.state_fingerprint)
    assert (ref.adapter_generation, ref.observation_version) == (3, 5)
    assert ref.attachments == [digest_bytes(data) for _, data in sorted(obs.attachments.items())]
    assert obs.state_fingerprint.startswith("sha256:")


def test_its_attachments_are_small_evidence(env: Env) -> None:
    for i in range(3):
        (env.path / f"extra-{i}.txt").write_text("x\n")

    obs = env.adapter.observe()

    assert obs.attachments
    assert all(isinstance(v, bytes) and len(v) <= 70 * 1024 for v in obs.attachments.values())
    text = b"".join(obs.attachments.values())
    assert b"extra-2.txt" in text
