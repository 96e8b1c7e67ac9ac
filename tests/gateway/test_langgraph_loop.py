"""The LangGraph example loop drives a run through the JSON API; run twice, one effect per call id."""

import httpx
import pytest
from django.core.wsgi import get_wsgi_application

from runtime.models import Run
from tests.gateway_clients.langgraph_agent import build_graph

pytestmark = pytest.mark.django_db(transaction=True)


def _http() -> httpx.Client:
    return httpx.Client(transport=httpx.WSGITransport(app=get_wsgi_application()),
                        base_url="http://127.0.0.1/api/v1")


def test_it_writes_each_planned_file_once_and_finishes(gw):
    with _http() as http:
        final = build_graph(http=http, run_id=gw.run_id, token=gw.token).invoke({"messages": []})
    statuses = [m["content"]["status"] for m in final["messages"] if m["role"] == "tool"]
    assert statuses == ["executed", "executed", "finished"]
    assert Run.objects.get(run_id=gw.run_id).phase == "completed"
    assert (gw.workspace / "notes/summary.txt").read_text() == "done by a LangGraph loop\n"
    assert sorted(gw.effects().values()) == [1, 1]


def test_a_restarted_loop_gets_the_original_receipts(gw):
    with _http() as http:
        graph = build_graph(http=http, run_id=gw.run_id, token=gw.token)
        first = graph.invoke({"messages": []})
        again = graph.invoke({"messages": []})  # the loop started over from nothing
    receipts = [m["content"].get("receipt") for m in first["messages"] if m["role"] == "tool"][:2]
    repeated = [m["content"] for m in again["messages"] if m["role"] == "tool"]
    assert [m.get("receipt") for m in repeated[:2]] == receipts
    assert all(m["repeated"] for m in repeated)
    assert sorted(gw.effects().values()) == [1, 1]
