"""The evidence a run leaves as it goes: the hash-chained trace and attachments (DESIGN.md sections 1 and 3).

:mod:`runtime.evidence.trace` (append-only, hash-chained events), :mod:`runtime.evidence.attachments`
(content-addressed files) and :mod:`runtime.evidence.search_terms` (what content search reads,
recorded with each intent). Exporting and verifying a whole run's evidence is
:mod:`runtime.bundles`.
"""
