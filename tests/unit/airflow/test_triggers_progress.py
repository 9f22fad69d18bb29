"""What the sensors judge, without I/O: a snapshot's notifications (SnapshotWatch), an
instance's positions (OffsetGoal), Kafka client settings."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.notifications import INCREMENTAL, SIGNAL, Notification, NotificationPage
from airflow_cdc.engine.server.models import InstancePosition, TaskPosition
from airflow_cdc.triggers.kafka_lag import client_settings
from airflow_cdc.triggers.progress import OffsetGoal, SnapshotWatch

SIGNAL_ID = "snap-1"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def note(kind: str, signal_id: str = SIGNAL_ID, aggregate: str = INCREMENTAL, **data: str) -> Notification:
    return Notification(aggregate, kind, {"connector_name": "shop", **data}, id=signal_id)


def scanned(table: str, rows: int, status: str = "SUCCEEDED") -> Notification:
    return note(
        "TABLE_SCAN_COMPLETED",
        data_collection=table,
        scanned_collection=table,
        total_rows_scanned=str(rows),
        status=status,
    )


def page(*notifications: Notification, reset: bool = False) -> NotificationPage:
    return NotificationPage("run-1", "run-1:9", tuple(notifications), reset)


def watch(clock: Clock, **kwargs: object) -> SnapshotWatch:
    return SnapshotWatch(SIGNAL_ID, stall_timeout=60, clock=clock, **kwargs)  # type: ignore[arg-type]


def test_a_snapshot_completes_with_its_rows_and_logs_its_progress() -> None:
    clock = Clock()
    w = watch(clock, tasks=1)
    lines = w.feed(
        page(
            note("STARTED", data_collections="public.orders"),
            note(
                "IN_PROGRESS",
                current_collection_in_progress="public.orders",
                rows_scanned="100",
                estimated_total_rows="200",
                eta_seconds="3",
            ),
        )
    )
    assert lines[1] == f"snapshot {SIGNAL_ID}: public.orders, 100 of ~200 rows, ETA 3s"
    assert w.verdict() is None
    w.feed(page(scanned("public.orders", 200), note("COMPLETED")))
    verdict = w.verdict()
    assert verdict is not None and verdict.succeeded
    assert verdict.message == f"snapshot {SIGNAL_ID} completed: public.orders 200 rows"


def test_other_signals_notifications_are_ignored() -> None:
    w = watch(Clock(), tasks=1)
    w.feed(page(note("STARTED", "other"), note("ABORTED", "other"), note("COMPLETED", "other")))
    assert w.verdict() is None and w.started == 0


@pytest.mark.parametrize("status", ["NO_PRIMARY_KEY", "SKIPPED", "SQL_EXCEPTION", "UNKNOWN_SCHEMA"])
def test_a_table_scan_that_did_not_succeed_fails_the_snapshot(status: str) -> None:
    w = watch(Clock(), tasks=1)
    w.feed(page(note("STARTED"), scanned("public.orders", 0, status), note("COMPLETED")))
    verdict = w.verdict()
    assert verdict is not None and verdict.status == "failed"
    assert f"table public.orders ended with status {status}" in verdict.message


def test_an_empty_table_is_read_completely_by_default() -> None:
    w = watch(Clock(), tasks=1)
    w.feed(page(note("STARTED"), scanned("public.orders", 0, "EMPTY"), note("COMPLETED")))
    verdict = w.verdict()
    assert verdict is not None and verdict.succeeded


def test_accept_statuses_can_make_an_empty_table_fail() -> None:
    w = watch(Clock(), tasks=1, accept_statuses=("SUCCEEDED",))
    w.feed(page(note("STARTED"), scanned("public.orders", 0, "EMPTY"), note("COMPLETED")))
    verdict = w.verdict()
    assert verdict is not None and verdict.status == "failed"


def test_aborted_fails_even_after_a_completed_sequence() -> None:
    w = watch(Clock(), tasks=2)
    w.feed(page(note("STARTED"), note("STARTED"), note("COMPLETED"), note("ABORTED")))
    verdict = w.verdict()
    assert verdict is not None and verdict.status == "failed" and "ABORTED" in verdict.message


def test_a_rejected_signal_fails_with_the_instances_reason() -> None:
    w = watch(Clock())
    w.feed(page(note("REJECTED", aggregate=SIGNAL, signal_id=SIGNAL_ID, problem="no captured table matches")))
    verdict = w.verdict()
    assert verdict is not None and verdict.status == "failed"
    assert "rejected signal snap-1: no captured table matches" in verdict.message


def test_every_sequence_of_the_signal_must_end() -> None:
    """Several databases: one STARTED ... COMPLETED per task under the same id."""
    w = watch(Clock(), tasks=2)
    w.feed(page(note("STARTED"), note("STARTED"), scanned("db1.public.orders", 3), note("COMPLETED")))
    assert w.verdict() is None
    w.feed(page(scanned("db2.public.orders", 4), note("COMPLETED")))
    verdict = w.verdict()
    assert verdict is not None and verdict.succeeded
    assert "db1.public.orders 3 rows, db2.public.orders 4 rows" in verdict.message


def test_fewer_sequences_than_tasks_wait_to_settle_for_a_late_started() -> None:
    clock = Clock()
    w = watch(clock, tasks=2, settle=2.0)
    w.feed(page(note("STARTED"), note("COMPLETED")))
    assert w.verdict() is None
    clock.now += 1.0
    w.feed(page(note("STARTED")))  # the other task read the signal late
    clock.now += 5.0
    assert w.verdict() is None  # its sequence is open
    w.feed(page(note("COMPLETED")))
    assert w.verdict() is not None  # as many as tasks: no settling


def test_one_sequence_of_two_tasks_succeeds_once_settled() -> None:
    clock = Clock()
    w = watch(clock, tasks=2, settle=2.0)
    w.feed(page(note("STARTED"), note("COMPLETED")))
    clock.now += 2.0
    verdict = w.verdict()
    assert verdict is not None and verdict.succeeded


def test_no_progress_for_stall_timeout_fails() -> None:
    clock = Clock()
    w = watch(clock, tasks=1)
    w.feed(page(note("STARTED")))
    clock.now += 59
    assert w.verdict() is None
    w.feed(page(note("IN_PROGRESS", rows_scanned="1")))  # progress resets the clock
    clock.now += 59
    assert w.verdict() is None
    clock.now += 1
    verdict = w.verdict()
    assert verdict is not None and verdict.status == "failed"
    assert "no progress for 60s" in verdict.message and "1 task(s) started it" in verdict.message


def test_a_snapshot_that_never_starts_stalls_too() -> None:
    clock = Clock()
    w = watch(clock)
    clock.now += 60
    verdict = w.verdict()
    assert verdict is not None and "it never started" in verdict.message


def test_a_paused_snapshot_does_not_stall_until_resumed() -> None:
    clock = Clock()
    w = watch(clock, tasks=1)
    w.feed(page(note("STARTED"), note("PAUSED")))
    for _ in range(5):
        clock.now += 59
        assert w.verdict() is None
    w.feed(page(note("RESUMED")))
    clock.now += 60
    verdict = w.verdict()
    assert verdict is not None and verdict.status == "failed"


def test_a_reset_cursor_counts_again_from_what_the_instance_keeps() -> None:
    w = watch(Clock(), tasks=1)
    w.feed(page(note("STARTED"), scanned("public.orders", 5)))
    lines = w.feed(page(note("STARTED"), scanned("public.orders", 5), note("COMPLETED"), reset=True))
    assert "no longer knew the notification cursor" in lines[0]
    verdict = w.verdict()
    assert verdict is not None and verdict.message.endswith("public.orders 5 rows")  # not 10


def test_a_completed_whose_started_was_compacted_away_still_completes() -> None:
    w = watch(Clock(), tasks=1)
    w.feed(page(scanned("public.orders", 5), note("COMPLETED")))
    clock_verdict = w.verdict()
    assert clock_verdict is None  # no STARTED seen: settles first
    w.settle = 0
    verdict = w.verdict()
    assert verdict is not None and verdict.succeeded


# -- offsets -----------------------------------------------------------------------------------
def position(*tasks: TaskPosition, target: str | None = None, phase: str = "streaming") -> InstancePosition:
    reached = None if target is None else all(t.reached for t in tasks)
    caught_up = all(t.caught_up for t in tasks)
    return InstancePosition(phase, "bytes", 0, caught_up, target, reached, tasks)


def task(name: str, committed: str, current: str | None, **flags: bool | None) -> TaskPosition:
    return TaskPosition(name, "streaming", {"server": name}, committed, current, 0, **flags)  # type: ignore[arg-type]


def test_a_position_target_is_the_engines_reached() -> None:
    goal = OffsetGoal("0/5")
    assert goal.targets() == ["0/5"]
    assert goal.judge([position(task("a", "0/3", "0/9", reached=False), target="0/5")]) is None
    verdict = goal.judge([position(task("a", "0/6", "0/9", reached=True), target="0/5")])
    assert verdict is not None and verdict.message == "committed offsets reached position 0/5"


def test_none_is_caught_up_at_the_check() -> None:
    goal = OffsetGoal(None)
    assert goal.targets() == [None]
    assert goal.judge([position(task("a", "0/3", "0/9", caught_up=False))]) is None
    assert goal.judge([position(task("a", "0/9", "0/9", caught_up=True))]) is not None


def test_current_is_each_tasks_position_when_fixed() -> None:
    goal = OffsetGoal("current")
    assert not goal.fixed
    assert not goal.fix_current(position(task("a", "0/1", "0/5"), task("b", "0/1", None)))  # b does not know yet
    assert goal.fix_current(position(task("a", "0/1", "0/5"), task("b", "0/1", "0/7")))
    assert goal.targets() == ["0/5", "0/7"]
    # Each answer is about one target: only the tasks whose target it is count.
    answers = [
        position(task("a", "0/5", "0/9", reached=True), task("b", "0/5", "0/9", reached=False), target="0/5"),
        position(task("a", "0/5", "0/9", reached=False), task("b", "0/6", "0/9", reached=False), target="0/7"),
    ]
    assert goal.judge(answers) is None
    answers[1] = position(task("a", "0/5", "0/9", reached=False), task("b", "0/8", "0/9", reached=True), target="0/7")
    verdict = goal.judge(answers)
    assert verdict is not None and verdict.succeeded and "a 0/5, b 0/7" in verdict.message


def test_a_failed_task_fails_the_wait() -> None:
    failed = TaskPosition("a", "failed", {"server": "a"}, "0/1", None)
    verdict = OffsetGoal("0/5").judge([position(failed, target="0/5")])
    assert verdict is not None and verdict.status == "failed" and verdict.message.startswith("a failed")


# -- Kafka client settings ---------------------------------------------------------------------
def test_client_settings_from_a_kafka_connections_extra() -> None:
    settings = client_settings(
        {
            "bootstrap.servers": "b1:9092,b2:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "group.id": "ignored",
            "request.timeout.ms": "5000",
        }
    )
    assert settings == {
        "bootstrap_servers": "b1:9092,b2:9092",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "request_timeout_ms": 5000,
    }


def test_client_settings_from_an_instances_sink_and_without_brokers() -> None:
    config = {
        "sink.kafka.producer.bootstrap.servers": "k:9092",
        "sink.kafka.producer.linger.ms": 5,
        "topic.prefix": "x",
    }
    assert client_settings(config, "sink.kafka.producer.") == {"bootstrap_servers": "k:9092"}
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        client_settings({"topic.prefix": "x"}, "sink.kafka.producer.")


def test_a_snapshot_debezium_goes_on_under_the_id_of_a_signal_that_joined_it_completes() -> None:
    """Debezium's order of notifications when a second execute-snapshot (``snap-2``) arrives while
    ``snap-1`` runs: snap-1's STARTED, then everything under snap-2 (no STARTED for it)."""
    clock = Clock()
    w, joined = watch(clock), SnapshotWatch("snap-2", stall_timeout=60, clock=clock)
    notes = page(
        note("STARTED", data_collections="public.orders"),
        note("IN_PROGRESS", "snap-2", data_collections="public.orders,public.customers", rows_scanned="10"),
        note("TABLE_SCAN_COMPLETED", "snap-2", data_collection="public.orders", total_rows_scanned="2000",
             status="SUCCEEDED"),
        note("TABLE_SCAN_COMPLETED", "snap-2", data_collection="public.customers", total_rows_scanned="50",
             status="SUCCEEDED"),
        note("COMPLETED", "snap-2"),
        note("STARTED", "snap-3", data_collections="public.orders"),  # a later snapshot: not ours
    )  # fmt: skip
    lines = w.feed(notes)
    joined.feed(notes)
    clock.now += 3
    assert any("goes on under signal snap-2" in line for line in lines), lines
    for verdict in (w.verdict(), joined.verdict()):
        assert verdict is not None and verdict.succeeded, verdict
        assert verdict.message.endswith("public.customers 50 rows, public.orders 2000 rows"), verdict
    assert (w.started, w.completed, w.aliases) == (1, 1, {"snap-2"})


def test_every_signal_of_a_chain_of_joins_sees_the_snapshot_complete() -> None:
    """Three signals, each joining the running snapshot (a declared pipeline's three groups
    starting at once): the snapshot goes on under snap-2, then under snap-3. The watch of snap-2,
    which never had a STARTED, follows it to snap-3 as well."""
    clock = Clock()
    watches = [watch(clock), *(SnapshotWatch(f"snap-{n}", stall_timeout=60, clock=clock) for n in (2, 3))]
    notes = page(
        note("STARTED", data_collections="public.orders"),
        note("IN_PROGRESS", "snap-2", data_collections="public.orders,public.customers", rows_scanned="10"),
        note("IN_PROGRESS", "snap-3", data_collections="public.orders,public.customers,public.items"),
        note("TABLE_SCAN_COMPLETED", "snap-3", data_collection="public.orders", total_rows_scanned="2000",
             status="SUCCEEDED"),
        note("TABLE_SCAN_COMPLETED", "snap-3", data_collection="public.customers", total_rows_scanned="50",
             status="SUCCEEDED"),
        note("TABLE_SCAN_COMPLETED", "snap-3", data_collection="public.items", total_rows_scanned="7",
             status="SUCCEEDED"),
        note("COMPLETED", "snap-3"),
        note("IN_PROGRESS", "snap-4", data_collections="public.orders"),  # a later snapshot: no one's
    )  # fmt: skip
    for w in watches:
        w.feed(notes)
    clock.now += 3
    for w in watches:
        verdict = w.verdict()
        assert verdict is not None and verdict.succeeded, (w.signal_id, verdict)
    assert [w.aliases for w in watches] == [{"snap-2", "snap-3"}, {"snap-3"}, set()]


def test_another_snapshot_of_other_tables_is_not_taken_for_a_continuation() -> None:
    clock = Clock()
    w = watch(clock)
    w.feed(page(note("STARTED", data_collections="public.orders"), note("COMPLETED", "snap-9"),
                note("IN_PROGRESS", "snap-9", data_collections="public.customers")))  # fmt: skip
    clock.now += 3
    assert w.aliases == set() and w.verdict() is None
