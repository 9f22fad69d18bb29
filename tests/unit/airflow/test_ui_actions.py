"""The CDC page's action guards and its history (ADR 0028), without a server: the cross-site
check on real Starlette requests, the signals the actions send, the ring buffer's buckets."""

from __future__ import annotations

import pytest
from fastapi import HTTPException
from starlette.requests import Request

from airflow_cdc.engine.signals import parse_signal
from airflow_cdc.monitoring import InstanceView
from airflow_cdc.ui.actions import SIGNALS, ActionRequest, check, require_same_origin, signal_data
from airflow_cdc.ui.history import History


def request(**headers: str) -> Request:
    raw = [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/", "headers": [(b"host", b"airflow:8080"), *raw]})


def test_only_the_pages_own_requests_pass() -> None:
    require_same_origin(request(x_airflow_cdc="action", origin="http://airflow:8080", sec_fetch_site="same-origin"))
    require_same_origin(request(x_airflow_cdc="action"))  # a script with a token: no browser, no cookie
    for refused in (
        request(),  # a cross-site form cannot set the header
        request(x_airflow_cdc="action", origin="http://evil:8080"),
        request(x_airflow_cdc="action", sec_fetch_site="same-site"),  # another port of the host
    ):
        with pytest.raises(HTTPException) as caught:
            require_same_origin(refused)
        assert caught.value.status_code == 403 and "cross-site request refused" in caught.value.detail


def test_the_signals_are_debeziums() -> None:
    snapshot = signal_data("snapshot", ActionRequest(tables=["public.orders", " public.items "], filter="id > 5"))
    assert snapshot == {
        "data-collections": ["public.orders", "public.items"],
        "type": "incremental",
        "additional-conditions": [
            {"data-collection": "public.orders", "filter": "id > 5"},
            {"data-collection": "public.items", "filter": "id > 5"},
        ],
    }
    for action, kind in SIGNALS.items():
        body = ActionRequest(tables=["public.orders"]) if action in ("snapshot", "stop-snapshot") else ActionRequest()
        parse_signal("page", kind, signal_data(action, body), "api")  # the engine's own check
    with pytest.raises(HTTPException, match="choose the tables"):
        check("snapshot", ActionRequest())
    with pytest.raises(HTTPException, match="unknown action"):
        check("drop-slot", ActionRequest())


def test_the_history_keeps_one_sample_a_bucket_for_the_window() -> None:
    now = [1000.0]
    history = History(window_s=60, bucket_s=10, clock=lambda: now[0])
    for second in range(0, 120, 2):  # a page refreshing every 2 s for two minutes
        now[0] = 1000.0 + second
        history.record("cdc", InstanceView("cdc", events_per_s=float(second), lag=second, observed_at=now[0]), 7)
    series = history.series("cdc")
    assert len(series) == 6 and series[-1] == [1118.0, 118.0, 118, 7]  # the newest of each bucket
    history.record("cdc", InstanceView("cdc", reachable=False, problem="down"), None)
    assert len(history.series("cdc")) == 6  # an unreachable look is a gap, not a zero

    reads = []
    assert history.retained("cdc", lambda: reads.append(1) or 5).bytes == 5
    assert history.retained("cdc", lambda: reads.append(1) or 6).bytes == 5 and len(reads) == 1  # once a bucket
    now[0] += 10
    failed = history.retained("cdc", lambda: 1 // 0)
    assert failed.bytes is None and "ZeroDivisionError" in (failed.problem or "")
