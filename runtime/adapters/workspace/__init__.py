"""The workspace adapter: a directory, receipts in an adapter-owned journal (DESIGN.md section 5).

Start at :mod:`runtime.adapters.workspace.adapter`; :mod:`runtime.adapters.workspace.journal` (the
append-only receipt journal, read incrementally), :mod:`runtime.adapters.workspace.files`
(durable file writes) and :mod:`runtime.adapters.workspace.scan` (observing the tree).
Framework-free.
"""
