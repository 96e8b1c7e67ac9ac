"""The replay acceptance check (``manage.py replay_check``; DESIGN.md section 8).

Replays a repository's first-parent history through the git-history planner and the git
adapter in child processes, SIGKILLs them from outside at moments a seeded RNG picks, resumes
after every kill, and then audits the result with plain ``git``, independently of the code under
test: the tip tree equals the source's, one target commit per source commit, one commit per
idempotency key, no commit without a key, the run completed and is not frozen.

Modules, one concept each:

* :mod:`.repository`  read-only ``git`` queries on the source and the target;
* :mod:`.task`        the replay task spec the check runs;
* :mod:`.processes`   process groups of the children: start, list (is git running?), kill;
* :mod:`.chaos`       drive the run in children and kill them at seeded random moments;
* :mod:`.audit`       the exactly-once checks on the finished target;
* :mod:`.fidelity`    each replayed commit read in git as its source (header, message, trailers);
* :mod:`.baseline`    the same commits made by a plain ``git`` loop, for the cost ratio;
* :mod:`.uninterrupted` the cost of a write: a sample replayed again with no kill, and the loop;
* :mod:`.report`      the result, as a table and as JSON;
* :mod:`.acceptance`  ``replay_check_run``: the whole check, end to end.
"""
