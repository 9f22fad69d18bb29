"""kill -9 the engine process mid-stream, several times, under a running write load: after a
final restart and catch-up, replaying the captured events yields exactly the source table, and
each crash repeated no more events than its bound (``crash_support``)."""

from __future__ import annotations

import json
import random
import signal
from typing import Any

import pytest

from .crash_support import duplicates_per_crash, kill_after_progress, lines, runs
from .pg_support import (
    WriteLoad,
    child_stderr,
    create_load_table,
    engine_config,
    source_image,
    start_child,
    wait_for_target,
)

ROWS, BATCH = 2000, 200


def identity(event: dict[str, Any]) -> tuple[Any, ...]:
    value = event["value"]
    return (value["source"]["lsn"], json.dumps(event["key"], sort_keys=True), value["op"])


@pytest.mark.slow
def test_kill_9_under_write_load_loses_nothing_and_repeats_within_the_bound(pg_server, pg_database, tmp_path):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, ROWS)
    config = engine_config(pg_server, pg_database, **{"max.batch.size": BATCH})
    flush_s = config["offset.flush.interval.ms"] / 1000
    log, offsets = tmp_path / "events.log", tmp_path / "offsets.json"
    rng = random.Random(3)
    committed_at_kill = []
    with WriteLoad(pg_server.dsn(pg_database), first_new_id=ROWS + 1) as load:
        for _ in range(3):
            target = max(lines(log), ROWS) + rng.randint(300, 3000)
            committed_at_kill.append(kill_after_progress(config, log, offsets, target))
        load.stop()
        assert load.transactions > 100
    child = start_child(config, log, offsets)
    with pg_server.connect(pg_database) as conn:
        expected = source_image(conn)
    wait_for_target(log, expected, child, 180)
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == 0, child_stderr(log)
    with pg_server.connect(pg_database) as conn:
        active = conn.execute(
            "select active from pg_replication_slots where slot_name = %s", (config["slot.name"],)
        ).fetchone()
    assert active == (False,)

    delivered = runs(log, identity)
    assert len(delivered) == 4
    report = duplicates_per_crash(delivered, committed_at_kill, flush_s, snapshot_rows=ROWS, batch=BATCH)
    print(f"duplicates per crash (measured, bound, busiest flush interval): {report}")
    assert all(repeated <= bound for repeated, bound, _ in report), report
