"""kill -9 the engine process mid-stream, several times, under a running write load: after a
final restart and catch-up, replaying the captured events yields exactly the source table."""

from __future__ import annotations

import random
import signal

import pytest

from airflow_cdc.engine.testing import wait_until

from .pg_support import (
    WriteLoad,
    child_stderr,
    create_load_table,
    engine_config,
    source_image,
    start_child,
    wait_for_target,
)


def lines(path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def kill_after_progress(config, log, offsets, target: int) -> None:
    child = start_child(config, log, offsets)
    wait_until(lambda: lines(log) >= target or child.poll() is not None, 60, "events flowing")
    assert child.poll() is None, child_stderr(log)
    child.send_signal(signal.SIGKILL)
    child.wait(30)


@pytest.mark.slow
def test_kill_9_under_write_load_loses_nothing(pg_server, pg_database, tmp_path):
    with pg_server.connect(pg_database) as conn:
        create_load_table(conn, 2000)
    config = engine_config(pg_server, pg_database, **{"max.batch.size": 200})
    log, offsets = tmp_path / "events.log", tmp_path / "offsets.json"
    rng = random.Random(3)
    with WriteLoad(pg_server.dsn(pg_database), first_new_id=2001) as load:
        for _ in range(3):
            kill_after_progress(config, log, offsets, max(lines(log), 2000) + rng.randint(300, 3000))
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
