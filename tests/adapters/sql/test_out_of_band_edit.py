"""An edit to the observed tables that did not go through the adapter changes the fingerprint but
not the version, so the engine sees environment drift as it does for the other adapters."""

from __future__ import annotations

from tests.adapters.sql.support import Target, order


def test_it_shows_an_out_of_band_update_as_a_new_fingerprint_at_the_same_version(target: Target) -> None:
    adapter = target.adapter()
    action = order("o-1", "key-1")
    adapter.execute(action, idempotency_key="key-1", intent_digest=action.intent_digest(), fencing_token=1,
                    blobs=lambda digest: b"")
    before = adapter.observe()

    target.sql("UPDATE orders SET amount_cents = 1 WHERE order_id = 'o-1'")
    after = adapter.observe()

    assert after.version == before.version == "s1"
    assert after.state_fingerprint != before.state_fingerprint
    assert after.instance_id == before.instance_id


def test_it_gives_another_database_another_instance(target: Target, tmp_path) -> None:
    from tests.adapters.sql.support import ORDERS_DDL

    copy = Target(kind="sqlite", url=f"sqlite:///{tmp_path / 'other.sqlite3'}")
    copy.sql(ORDERS_DDL)

    assert copy.adapter().instance_id() != target.adapter().instance_id()
