"""Database plumbing every store uses (DESIGN.md sections 4 and 4.3).

:mod:`runtime.database.statements` (the hot statements of the commit and restore paths, compiled
by the ORM once per shape), :mod:`runtime.database.commit_writes` (the writes a checkpoint commit
runs for its callers), :mod:`runtime.database.pipeline` (sending a transaction's statements
as one batch on PostgreSQL), :mod:`runtime.database.clock` (the one clock every expiry is judged
by: the database's) and :mod:`runtime.database.routers` (the high-water mark model in a database
of its own). Nothing here knows about runs; everything else builds on it.
"""
