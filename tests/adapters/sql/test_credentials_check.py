"""Before a resume executes anything the engine asks the SQL adapter to log in again: a revoked
role is a typed, non-retryable refusal (the run freezes with that reason, DESIGN.md section 5.9),
while a target that is only unreachable stays retryable."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from runtime.errors import SqlCredentialRejectedError, SqlTargetUnavailableError
from tests.adapters.sql.support import OPTIONS, ORDERS_DDL, Target, postgres_server_url


def test_it_passes_the_probe_with_a_valid_login(sqlite_target: Target) -> None:
    sqlite_target.adapter().credentials_check()


@pytest.mark.postgres
def test_it_refuses_a_revoked_role_as_a_credential_problem() -> None:
    role, database = f"ratchet_sqlx_role_{uuid.uuid4().hex[:8]}", f"ratchet_sqlx_target_{uuid.uuid4().hex[:10]}"
    admin = postgres_server_url() + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE DATABASE "{database}" OWNER "{role}"')
    try:
        host = postgres_server_url().split("@", 1)[-1]
        target = Target(kind="postgres", url=f"postgresql://{role}@{host}/{database}")
        target.sql(ORDERS_DDL)
        adapter = target.adapter()
        adapter.credentials_check()

        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'ALTER ROLE "{role}" NOLOGIN')

        with pytest.raises(SqlCredentialRejectedError) as caught:
            adapter.credentials_check()
        assert caught.value.retryable is False
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


@pytest.mark.postgres
def test_it_keeps_an_unreachable_target_retryable() -> None:
    from runtime.adapters.sql.adapter import SqlAdapter

    with pytest.raises(SqlTargetUnavailableError) as caught:
        SqlAdapter(options={**OPTIONS, "url": "postgresql://postgres@127.0.0.1:1/nothing"})
    assert caught.value.retryable is True
