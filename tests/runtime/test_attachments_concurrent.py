"""Two runs storing the same bytes at once: real processes put and read the same attachments.

DESIGN.md section 3: attachments are content-addressed, so two runs that write the same file
content store the same digest. On the local filesystem a put is a temp file renamed over the
name, so a concurrent put never deletes another's copy and a concurrent read never sees a
partial one (which would hash wrong and look like tampering).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.procs import ROOT, child_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

CHILDREN = 3
BLOBS = 40

CHILD = """
import json, os, sys, time
from pathlib import Path
import django
django.setup()
from runtime.errors import AttachmentError
from runtime.evidence.attachments import attachment_get, attachment_put
go, blobs, me, children = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
barrier = go.parent / "barrier"
barrier.mkdir(exist_ok=True)
(go.parent / f"ready-{me}").touch()
while not go.exists():
    time.sleep(0.005)
failures = []
for round_ in range(3):
    for n in range(blobs):
        # Every child puts the same blob at the same moment: none can run ahead and leave
        # the others a finished copy to find.
        (barrier / f"{round_}-{n}-{me}").touch()
        while len(list(barrier.glob(f"{round_}-{n}-*"))) < children:
            time.sleep(0.0005)
        data = bytes([(n + 61 * round_) % 251]) * (1024 * 1024 + n)
        try:
            # No row is written (the row would ride on a checkpoint commit), so every put of
            # every child stores the bytes again: the most contention the name can see.
            digest = attachment_put(data=data, row_writes=[])
            if attachment_get(digest=digest) != data:
                failures.append(f"blob {n}: read other bytes")
        except AttachmentError as exc:
            failures.append(f"blob {n}: {exc}")
print(json.dumps({"failures": failures}))
"""


def test_concurrent_puts_of_the_same_content_never_tear(tmp_path):
    env = child_env(RATCHET_MEDIA_ROOT=str(tmp_path / "media"))
    go = tmp_path / "go"
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(go), str(BLOBS), str(n),
                                  str(CHILDREN)],
                                 env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
                for n in range(CHILDREN)]
    wait_for(lambda: all((tmp_path / f"ready-{n}").exists() for n in range(CHILDREN)),
             timeout=120, what="every child ready")
    go.touch()
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == {"failures": []}
    stored = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
    assert len(stored) == 3 * BLOBS  # one copy per digest, no temp file left behind
