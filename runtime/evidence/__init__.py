"""The evidence a run leaves as it goes: the hash-chained trace and attachments (DESIGN.md sections 1 and 3).

:mod:`runtime.evidence.trace` (append-only, hash-chained events), :mod:`runtime.evidence.attachments`
(content-addressed files), :mod:`runtime.evidence.search_terms` (what content search reads,
recorded with each intent) and :mod:`runtime.evidence.listeners` (other apps hearing of each
appended event, as the notifications do). Exporting and verifying a whole run's evidence is
:mod:`runtime.bundles`.
"""
