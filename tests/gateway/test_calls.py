"""A call from outside goes through the whole write path once, however often it is repeated."""

import pytest

from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.decisions.cancellation import run_request_cancel
from runtime.errors import (
    GatewayCallConflictError,
    GatewayInputError,
    GatewayPayloadTooLargeError,
    GatewayPolicyRefusedError,
    GatewayRunStoppedError,
    GatewayUnknownActionError,
    GatewayWaitingForApprovalError,
)
from runtime.gateway.calls import call_submit
from runtime.models import ReviewCase, Run, TraceEvent

pytestmark = pytest.mark.django_db(transaction=True)

NOTE = {"path": "notes/a.txt", "content": "hello\n"}


def test_it_executes_a_call_once_and_returns_the_original_receipt_when_repeated(gw):
    first = call_submit(run_id=gw.run_id, call_id="c1", tool="write_file", arguments=NOTE, token=gw.token)
    assert first.status == "executed" and not first.repeated
    assert (gw.workspace / "notes/a.txt").read_text() == "hello\n"
    again = call_submit(run_id=gw.run_id, call_id="c1", tool="write_file", arguments=NOTE, token=gw.token)
    assert again.repeated and again.receipt == first.receipt and again.idempotency_key == first.idempotency_key
    assert gw.effects() == {first.idempotency_key: 1}
    proposed = TraceEvent.objects.filter(run_id=gw.run_id, event_type="intent.proposed").count()
    assert proposed == 1


def test_it_gives_each_call_id_its_own_key(gw):
    a = call_submit(run_id=gw.run_id, call_id="c1", tool="write_file", arguments=NOTE, token=gw.token)
    b = call_submit(run_id=gw.run_id, call_id="c2", tool="write_file",
                    arguments={"path": "notes/b.txt", "content": "b\n"}, token=gw.token)
    assert a.idempotency_key != b.idempotency_key
    assert gw.effects() == {a.idempotency_key: 1, b.idempotency_key: 1}


def test_it_refuses_an_executed_call_id_repeated_with_other_arguments_and_the_run_goes_on(gw):
    first = call_submit(run_id=gw.run_id, call_id="c1", tool="write_file", arguments=NOTE, token=gw.token)
    generation = Run.objects.get(run_id=gw.run_id).generation
    with pytest.raises(GatewayCallConflictError) as caught:
        call_submit(run_id=gw.run_id, call_id="c1", tool="write_file",
                    arguments={"path": "notes/a.txt", "content": "other\n"}, token=gw.token)
    assert caught.value.code == "call_conflict" and not caught.value.retryable
    assert caught.value.context["executed"] is True and "frozen" not in caught.value.context
    assert "'c1' was already used with other arguments and its write executed" in caught.value.message
    # Both sides, readable: what the call id recorded and what was just sent.
    assert "  | hello" in caught.value.context["recorded_arguments"]
    assert 'params.content: "other\\n"' in caught.value.context["sent_arguments"]
    assert "-  | hello" in caught.value.context["diff"] and '+params.content: "other' in caught.value.context["diff"]
    assert (gw.workspace / "notes/a.txt").read_text() == "hello\n"
    run = Run.objects.get(run_id=gw.run_id)
    assert run.phase == "running" and run.generation == generation, "nothing committed, nothing frozen"
    assert not ReviewCase.objects.filter(run_id=gw.run_id).exists()
    again = call_submit(run_id=gw.run_id, call_id="c1", tool="write_file", arguments=NOTE, token=gw.token)
    assert again.repeated and again.receipt == first.receipt  # the original receipt still stands
    later = call_submit(run_id=gw.run_id, call_id="c2", tool="write_file",
                        arguments={"path": "notes/a.txt", "content": "other\n"}, token=gw.token)
    assert later.status == "executed", "the run takes further calls"
    assert gw.effects() == {first.idempotency_key: 1, later.idempotency_key: 1}


def test_it_derives_a_call_id_when_none_is_sent_so_an_identical_call_is_idempotent(gw):
    first = call_submit(run_id=gw.run_id, call_id=None, tool="write_file", arguments=NOTE, token=gw.token)
    assert first.status == "executed" and first.call_id.startswith("d-") and not first.repeated
    same = call_submit(run_id=gw.run_id, call_id="", tool="write_file", arguments=dict(reversed(NOTE.items())),
                       token=gw.token)
    assert same.call_id == first.call_id and same.repeated and same.receipt == first.receipt
    other = call_submit(run_id=gw.run_id, call_id=None, tool="write_file",
                        arguments={"path": "notes/a.txt", "content": "bye\n"}, token=gw.token)
    assert other.call_id != first.call_id and other.status == "executed" and not other.repeated
    assert gw.effects() == {first.idempotency_key: 1, other.idempotency_key: 1}


def test_a_call_while_another_waits_for_approval_answers_waiting_not_stopped(gw, settings):
    settings.RATCHET_PUBLIC_BASE_URL = "https://ratchet.example.test/"
    args = {"path": "config/limits.toml", "content": "max = 3\n"}
    waiting = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=args, token=gw.token)
    assert waiting.approval_url == f"https://ratchet.example.test/runs/{gw.run_id}/"
    with pytest.raises(GatewayWaitingForApprovalError) as caught:
        call_submit(run_id=gw.run_id, call_id="next", tool="write_file", arguments=NOTE, token=gw.token)
    err = caught.value
    assert err.code == "waiting_for_approval" and err.retryable and err.status == 409
    assert err.context["approval_url"] == f"https://ratchet.example.test/runs/{gw.run_id}/"
    assert err.context["waiting_for"] == waiting.idempotency_key
    [item] = approvals_waiting(run_ids=[gw.run_id])
    approval_grant(run_id=gw.run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    assert call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=args,
                       token=gw.token).status == "executed"
    assert call_submit(run_id=gw.run_id, call_id="next", tool="write_file", arguments=NOTE,
                       token=gw.token).status == "executed", "the retried call goes through"


def test_it_refuses_a_call_id_waiting_for_approval_repeated_with_other_arguments_and_changes_nothing(gw):
    args = {"path": "config/limits.toml", "content": "max = 3\n"}
    waiting = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=args, token=gw.token)
    assert waiting.status == "waiting_for_approval"
    generation = Run.objects.get(run_id=gw.run_id).generation
    with pytest.raises(GatewayCallConflictError) as caught:
        call_submit(run_id=gw.run_id, call_id="risky", tool="write_file",
                    arguments={"path": "config/limits.toml", "content": "max = 9\n"}, token=gw.token)
    assert "frozen" not in caught.value.context
    run = Run.objects.get(run_id=gw.run_id)
    assert run.phase == "awaiting_approval" and run.generation == generation
    assert not ReviewCase.objects.filter(run_id=gw.run_id).exists()
    assert gw.effects() == {}


def test_it_waits_for_an_approval_then_executes_the_same_call_id_once(gw):
    args = {"path": "config/limits.toml", "content": "max = 3\n"}
    waiting = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=args, token=gw.token)
    assert waiting.status == "waiting_for_approval"
    assert waiting.approval_url == f"http://localhost:8000/runs/{gw.run_id}/", "absolute by default"
    still = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=args, token=gw.token)
    assert still.status == "waiting_for_approval" and still.repeated
    assert not (gw.workspace / "config/limits.toml").exists()
    [item] = approvals_waiting(run_ids=[gw.run_id])
    approval_grant(run_id=gw.run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    done = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=args, token=gw.token)
    assert done.status == "executed"
    again = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=args, token=gw.token)
    assert again.repeated and again.receipt == done.receipt
    assert gw.effects() == {done.idempotency_key: 1}


@pytest.mark.parametrize(("tool", "arguments", "error"), [
    ("write_file", {"path": "elsewhere/x.txt", "content": "x"}, GatewayPolicyRefusedError),
    # An unsafe path fails the tool's schema (the task spec's path rule), before the policy is asked.
    ("write_file", {"path": "../escape.txt", "content": "x"}, GatewayInputError),
    ("run_shell", {"cmd": "true"}, GatewayUnknownActionError),
    ("write_file", {"path": "notes/x.txt"}, GatewayInputError),
    ("write_file", {"path": "notes/x.txt", "content": 5}, GatewayInputError),
    ("write_file", ["not", "an", "object"], GatewayInputError),
])
def test_it_refuses_bad_calls_before_anything_is_touched(gw, tool, arguments, error):
    generation = Run.objects.get(run_id=gw.run_id).generation
    with pytest.raises(error):
        call_submit(run_id=gw.run_id, call_id="bad", tool=tool, arguments=arguments, token=gw.token)
    assert Run.objects.get(run_id=gw.run_id).generation == generation
    assert gw.effects() == {}
    assert not TraceEvent.objects.filter(run_id=gw.run_id, event_type="lease.acquired").exclude(
        payload__worker="starter").exists()


def test_it_refuses_an_oversized_call(gw, settings):
    settings.RATCHET_GATEWAY_MAX_BYTES = 1000
    with pytest.raises(GatewayPayloadTooLargeError):
        call_submit(run_id=gw.run_id, call_id="big", tool="write_file",
                    arguments={"path": "notes/big.txt", "content": "x" * 2000}, token=gw.token)
    assert gw.effects() == {}


def test_it_finishes_the_run_and_refuses_later_calls(gw):
    call_submit(run_id=gw.run_id, call_id="c1", tool="write_file", arguments=NOTE, token=gw.token)
    finished = call_submit(run_id=gw.run_id, call_id="end", tool="finish", arguments={"summary": "ok"},
                           token=gw.token)
    assert finished.status == "finished" and finished.phase == "completed"
    with pytest.raises(GatewayRunStoppedError) as caught:
        call_submit(run_id=gw.run_id, call_id="c3", tool="write_file", arguments=NOTE, token=gw.token)
    assert caught.value.context["phase"] == "completed"
    repeated = call_submit(run_id=gw.run_id, call_id="c1", tool="write_file", arguments=NOTE, token=gw.token)
    assert repeated.status == "executed" and repeated.repeated  # from the committed checkpoint


def test_it_answers_finish_on_a_cancelled_run_with_a_stopped_error(gw):
    call_submit(run_id=gw.run_id, call_id="c1", tool="write_file", arguments=NOTE, token=gw.token)
    run_request_cancel(run_id=gw.run_id, requested_by="operator")  # settled at the next step
    # An agent that calls finish must not read an ended, unsuccessful run as its own success.
    with pytest.raises(GatewayRunStoppedError) as caught:
        call_submit(run_id=gw.run_id, call_id="end", tool="finish", arguments={"summary": "ok"},
                    token=gw.token)
    assert caught.value.context["phase"] == "cancelled"


def test_a_worker_without_a_call_settles_nothing_and_proposes_nothing(gw):
    from runtime.engine import run_advance

    report = run_advance(run_id=gw.run_id, worker="sweeper-driven")
    assert report.phase == "running" and report.steps == 0
    assert not TraceEvent.objects.filter(run_id=gw.run_id, event_type="intent.proposed").exists()
