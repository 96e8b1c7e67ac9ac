"""The SQL adapter: named statement templates against SQLite or PostgreSQL (DESIGN.md section 5).

Receipts and the fence live in the target's own transaction.

Start at :mod:`runtime.adapters.sql.adapter`; :mod:`runtime.adapters.sql.options` (the plug-in's
options), :mod:`runtime.adapters.sql.templates` (the named templates),
:mod:`runtime.adapters.sql.target` (connecting), :mod:`runtime.adapters.sql.store` (the adapter's
own receipt and fence tables), :mod:`runtime.adapters.sql.rows` and
:mod:`runtime.adapters.sql.redaction`. Framework-free.
"""
