"""Example Ratchet plug-ins (DESIGN.md section 5.10): copy this package to run your own agent.

* :mod:`.planner` -- ``NoteTaker``: writes N notes, keeping a counter in its planner state;
* :mod:`.kvstore` -- ``KeyValueStore``: a JSON file of keys that keeps its own receipts;
* :mod:`.verifier` -- ``NotesPresent``: passes when every note is in the store.
"""
