"""The git adapter: a repository whose receipts are commits carrying trailers (DESIGN.md section 5).

Start at :mod:`runtime.adapters.git.adapter` (the adapter: observe, predict, execute, query by key).
The write path: :mod:`runtime.adapters.git.commit_params` (the commit an action asks for),
:mod:`runtime.adapters.git.trees` (blobs and trees, in-process with libgit2),
:mod:`runtime.adapters.git.process` (the few git children). Receipts:
:mod:`runtime.adapters.git.receipts` (trailers written and read back) and
:mod:`runtime.adapters.git.key_index` (idempotency key to commit). Safety gates:
:mod:`runtime.adapters.git.status` (is the working tree clean), :mod:`runtime.adapters.git.state`
and :mod:`runtime.adapters.git.recovery` (interrupted writes inside git). Framework-free.
"""
