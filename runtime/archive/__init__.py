"""Retention and archive of finished runs (DESIGN.md section 4.11).

A finished run's signed evidence bundle goes to a Django storage backend and the run's bulky
rows (checkpoints, trace, receipts ledger, idempotency records, search terms, decided review
cases) are removed, leaving the ``Run`` row with the bundle's location and digest; the bundle
still verifies offline with public keys only.

Modules, one concept each:

* :mod:`.selection`  which runs may go (finished, old enough, nothing live needs them);
* :mod:`.bundle_store` writing and reading a bundle in the archive storage, checked by digest;
* :mod:`.runs`       archiving one run crash-safely, and one pass over many;
* :mod:`.sweep`      removing attachments only archived runs referenced;
* :mod:`.verify`     verifying an archived run's bundle with public keys only.
"""
