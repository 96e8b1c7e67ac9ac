"""Framework-free core of the Ratchet runtime.

Nothing under ``runtime.core`` imports Django: canonical JSON and typed digests, keyrings and
HMAC signing, the checkpoint schema, its invariants, signed envelope and migrators, and the run
state machine. They can be used (and tested) without a database or settings module (DESIGN.md
section 2).

The names below are the curated surface; the submodules stay importable for everything else.
"""

from runtime.core.canonical import DigestKind, canonical_json, check_digest, digest, digest_bytes
from runtime.core.checkpoint import SCHEMA_VERSION, TERMINAL_PHASES, Phase, RunState, StopReason
from runtime.core.envelope import CheckpointEnvelope, envelope_digest, open_envelope, seal
from runtime.core.invariants import check_invariants, validate_state
from runtime.core.migrators import MIGRATORS, migrate_envelope
from runtime.core.signing import Keyring, SecretKey, Signature, TrustRoot, parse_keyring_spec
from runtime.core.statemachine import TRANSITIONS, Event, allowed_events, transition

__all__ = [
    "MIGRATORS",
    "SCHEMA_VERSION",
    "TERMINAL_PHASES",
    "TRANSITIONS",
    "CheckpointEnvelope",
    "DigestKind",
    "Event",
    "Keyring",
    "Phase",
    "RunState",
    "SecretKey",
    "Signature",
    "StopReason",
    "TrustRoot",
    "allowed_events",
    "canonical_json",
    "check_digest",
    "check_invariants",
    "digest",
    "digest_bytes",
    "envelope_digest",
    "migrate_envelope",
    "open_envelope",
    "parse_keyring_spec",
    "seal",
    "transition",
    "validate_state",
]
