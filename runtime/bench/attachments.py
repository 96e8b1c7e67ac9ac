"""Attachment put and get throughput for 1 MiB blobs."""

from __future__ import annotations

import os
import time

from runtime.bench.report import MIB, BenchReport, rate_metric
from runtime.bench.sizes import BenchSizes
from runtime.errors import BenchmarkError
from runtime.evidence.attachments import attachment_get, attachment_put


def attachments_measure(*, report: BenchReport, sizes: BenchSizes) -> None:
    """``sizes.repeat`` times: put ``sizes.attachments`` fresh 1 MiB blobs, then get them back;
    append both throughputs (MiB/s) to ``report``.

    Raises:
        BenchmarkError: a blob came back with another size.
    """
    puts: list[float] = []
    gets: list[float] = []
    for _ in range(sizes.repeat):
        # Fresh random bytes every time: putting known content is a no-op by design.
        blobs = [os.urandom(MIB) for _ in range(sizes.attachments)]
        started = time.perf_counter()
        digests = [attachment_put(data=blob) for blob in blobs]
        puts.append(len(blobs) / (time.perf_counter() - started))
        started = time.perf_counter()
        for d, blob in zip(digests, blobs, strict=True):
            if len(attachment_get(digest=d)) != len(blob):
                raise BenchmarkError("attachment came back with another size", digest=d)
        gets.append(len(blobs) / (time.perf_counter() - started))
    report.metrics += [
        rate_metric("attachment_put_mib_per_s", "attachment put, 1 MiB blobs", "MiB/s", puts),
        rate_metric("attachment_get_mib_per_s", "attachment get (re-hashed), 1 MiB blobs",
                    "MiB/s", gets),
    ]
