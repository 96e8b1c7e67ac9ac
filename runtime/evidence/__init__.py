"""The evidence a run leaves: the hash-chained trace, attachments and signed bundles (DESIGN.md sections 3 and 4.8).

:mod:`runtime.evidence.trace` (append-only, hash-chained events), :mod:`runtime.evidence.attachments`
(content-addressed files), :mod:`runtime.evidence.bundles` (export of one signed JSON bundle),
:mod:`runtime.evidence.bundle_verification` (offline verification with public keys only) and
:mod:`runtime.evidence.search_terms` (what content search reads, recorded with each intent).
"""
