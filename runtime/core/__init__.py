"""Framework-free core of the Ratchet runtime.

Nothing under ``runtime.core`` imports Django: canonical JSON and typed digests, keyrings and
HMAC signing, the checkpoint schema and its migrators, and the run state machine. They can be
used (and tested) without a database or settings module.
"""
