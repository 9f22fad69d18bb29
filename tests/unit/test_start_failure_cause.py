"""The cause a failed detached start leads with (``control.failure_cause``), on the lines and
status a run leaves behind: this run's recorded error, else its last logged error, else the
exception that ended it before it could log."""

from __future__ import annotations

from airflow_cdc.engine.server.control import failure_cause

LOGGED = [
    "2026-01-01 12:00:00,000 INFO airflow_cdc.engine.state: engine 'x': CREATING -> INITIALIZING",
    "2026-01-01 12:00:00,010 ERROR airflow_cdc.engine.task_runner: task x-0 failed to start: refused",
    "2026-01-01 12:00:00,020 ERROR airflow_cdc.engine.server.engine_run: instance 'x': engine failed:  it   stopped",
    "2026-01-01 12:00:00,030 INFO airflow_cdc.engine.state: engine 'x': STOPPING -> STOPPED",
]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "cli.py", line 1, in <module>',
    "    main()",
    "OSError: [Errno 28] No space left on device",
]


def test_the_error_this_run_recorded_comes_first_on_one_line() -> None:
    status = {"pid": 42, "error": 'password authentication failed\nfor user "x"'}
    assert failure_cause(status, 42, LOGGED) == 'password authentication failed for user "x"'


def test_an_earlier_runs_recorded_error_is_not_this_runs_cause() -> None:
    earlier = {"pid": 41, "error": 'database "gone" does not exist'}
    assert failure_cause(earlier, 42, LOGGED) == "instance 'x': engine failed: it stopped"


def test_without_a_logged_error_the_exception_that_ended_it() -> None:
    assert failure_cause(None, 42, ["starting", *TRACEBACK]) == "OSError: [Errno 28] No space left on device"


def test_no_cause_when_nothing_says_one() -> None:
    assert failure_cause(None, 42, ["2026-01-01 12:00:00,000 INFO a: fine"]) is None
    assert failure_cause(None, 42, []) is None
