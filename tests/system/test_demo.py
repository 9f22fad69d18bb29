"""The README's main command, ``airflow-cdc demo``, run as a user runs it (a child process, no
Airflow variables, its own temporary directory): it passes, its report says what it did, and it
leaves nothing behind - not after a Ctrl-C either. Its check itself is tested on real tables:
a target that differs from the source fails it, naming the keys.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_cdc import cli
from airflow_cdc.demo import DemoFailed, DemoOptions
from airflow_cdc.demo.check import compare, failure, report
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BIN = Path(sys.executable).parent
TASKS = ("start_engine", "snapshot", "snapshot_done", "caught_up", "apply_changes")
#: A report line: table, source rows and md5, target rows and md5, verdict.
REPORT_LINE = re.compile(
    r"^  (public\.\w+)\s+(\d+)\s+([0-9a-f]{12})\s+(\d+)\s+([0-9a-f]{12})\s+(same|DIFFERENT)$", re.M
)


def demo_env(scratch: Path) -> dict[str, str]:
    """A user's environment: no Airflow settings (this test process has some), and a temporary
    directory of the test's own, which must be empty again afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["TMPDIR"] = str(scratch)
    return env


def run_demo(scratch: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "airflow-cdc"), "demo", *args],
        env=demo_env(scratch),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def scratch() -> Iterator[Path]:
    """The demo's TMPDIR: like /tmp, open to the postgres user its PostgreSQL runs as (pytest's
    own tmp_path is private to root)."""
    directory = Path(tempfile.mkdtemp(prefix="cdc-demo-test-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def processes_using(path: Path) -> list[str]:
    """Command lines of the processes that name ``path`` (servers, engines, Spark drivers)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in text:
            found.append(text)
    return found


def assert_left_nothing(scratch: Path) -> None:
    assert list(scratch.iterdir()) == [], "files left behind"
    assert processes_using(scratch) == [], "processes left behind"


def assert_checked(output: str, parts: int, customers: int = 500) -> None:
    """Each part's report: both tables, counts and checksums equal, and the verdict."""
    lines = REPORT_LINE.findall(output)
    assert [line[0] for line in lines] == ["public.customers", "public.orders"] * parts, output
    for table, rows, md5, target_rows, target_md5, verdict in lines:
        assert (rows, md5, verdict) == (target_rows, target_md5, "same"), table
    assert int(lines[0][1]) == customers and int(lines[1][1]) > 5 * customers  # sample rows, and the writes' changes
    assert output.count("check passed: target equals source") == parts


def assert_snapshot_through_the_signal_table(output: str, customers: int = 500) -> None:
    # The instance streams from its start (snapshot.mode no_data): the rows that existed reach the
    # target only through the snapshot the signal table's row asked for, under that row's id.
    assert "execute-snapshot demo-snapshot-1 inserted into public.debezium_signal" in output
    assert "snapshot demo-snapshot-1 started: public.customers, public.orders" in output
    assert re.search(r"snapshot \d+% \(\d+/\d+ rows\)", output), "no progress shown"
    assert f"public.customers: {customers} rows read" in output
    assert "snapshot demo-snapshot-1 completed" in output
    writes = re.search(r"(\d+) write transactions captured", output)
    assert writes and int(writes.group(1)) > 0, "no write load while capturing"


@pytest.mark.timeout(900)  # a few minutes on an idle machine; more beside a benchmark
def test_the_demo_captures_applies_checks_then_runs_the_example_dag(scratch: Path) -> None:
    done = run_demo(scratch, timeout=840)
    output = done.stdout
    assert done.returncode == 0, output + done.stderr
    assert_snapshot_through_the_signal_table(output)
    assert re.search(r"change events in \d+ batch\(es\)", output)
    assert "dag.test() of example_cdc_pipeline" in output
    airflow_part = output[output.index("dag.test() of example_cdc_pipeline") :]
    for task in TASKS:
        assert f"  task {task} running" in airflow_part
        assert f"  task {task}: success" in airflow_part
    # The writes went on until the caught_up sensor started, not after.
    stopped = re.search(r"write load stopped after (\d+) transactions", airflow_part)
    assert stopped and int(stopped.group(1)) > 0
    sensor = airflow_part.index("task caught_up running"), airflow_part.index("task caught_up: success")
    assert sensor[0] < stopped.start() < sensor[1]
    assert "example_cdc_pipeline succeeded: snapshot of public.customers 500 rows" in airflow_part
    assert_checked(output, parts=2)
    assert "demo passed in" in output
    assert_left_nothing(scratch)


@pytest.mark.timeout(600)
def test_the_demo_through_a_kafka_broker(scratch: Path) -> None:
    done = run_demo(scratch, "--kafka", "--skip-airflow", "--rows", "3000", timeout=540)
    output = done.stdout
    assert done.returncode == 0, output + done.stderr
    assert re.search(r"Kafka on 127\.0\.0\.1:\d+", output)
    assert "engine instance 'demo' (Kafka sink)" in output
    assert_snapshot_through_the_signal_table(output, customers=300)
    assert "dag.test()" not in output
    assert_checked(output, parts=1, customers=300)
    assert_left_nothing(scratch)


def test_ctrl_c_stops_and_removes_everything(scratch: Path) -> None:
    """Interrupted while the Spark job runs (its driver in a session of its own, out of the
    terminal's reach): the demo kills it, stops the engine and PostgreSQL, removes its files."""
    demo = subprocess.Popen(
        [str(BIN / "airflow-cdc"), "demo", "--skip-airflow"],
        env=demo_env(scratch),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As a terminal starts it: SIGINT handled even when this test runs in the background,
        # where the shell made it (and so every child) ignore SIGINT.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        wait_until(lambda: demo.poll() is not None or spark_driver_of(demo.pid), 300, "spark-submit", interval=0.2)
        assert demo.poll() is None, demo.communicate()
        assert processes_using(scratch), "the engine and PostgreSQL should run by now"
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=180)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 130, out + err
    assert "demo interrupted" in err
    assert "cleaned up" not in out  # the interrupted run did not pretend to pass
    assert_left_nothing(scratch)


def spark_driver_of(pid: int) -> bool:
    """Whether a child of ``pid`` is a spark-submit."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if fields[1] == str(pid) and b"spark" in cmdline:
            return True
    return False


# -- the check itself, on real tables -------------------------------------------------------------
@pytest.fixture
def two_tables(pg_server: PostgresServer, pg_database: str) -> Iterator[tuple[str, str]]:
    """(source dsn, target dsn): ``public.orders`` with the same 100 rows in both databases, the
    target's with the apply job's ``_cdc_position`` column."""
    target_db = f"{pg_database}_target"
    ddl = "create table orders (id int primary key, amount numeric(10,2), at timestamptz, note text)"
    fill = (
        "insert into orders select g, g * 1.5, timestamptz '2026-01-01' + g * interval '1 hour', null "
        "from generate_series(1, 100) g"
    )
    with pg_server.connect() as admin:
        admin.execute(f"create database {target_db}")
    source, target = pg_server.dsn(pg_database), pg_server.dsn(target_db)
    with psycopg.connect(source, autocommit=True) as conn:
        conn.execute(ddl)
        conn.execute(fill)
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(ddl)
        conn.execute("alter table orders add column _cdc_position varchar(64)")
        conn.execute(fill)
        conn.execute("update orders set _cdc_position = lpad(id::text, 16, '0')")
    yield source, target
    pg_server.drop_database(target_db)


def test_the_check_passes_on_equal_tables_whatever_the_position_column(two_tables: tuple[str, str]) -> None:
    source, target = two_tables
    [check] = compare(source, target, ["public.orders"])
    assert check.same and check.source == check.target and check.source.rows == 100
    assert failure([check]) is None
    assert report([check])[1].endswith("same")


def test_the_check_names_missing_extra_and_different_rows(two_tables: tuple[str, str]) -> None:
    source, target = two_tables
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("delete from orders where id in (3, 4)")
        conn.execute("update orders set note = 'changed' where id = 7")
        conn.execute("insert into orders values (101, 1, now(), null)")
    [check] = compare(source, target, ["public.orders"])
    assert not check.same
    assert check.target is not None and check.target.rows == 99 and check.target.md5 != check.source.md5
    message = failure([check])
    assert message == (
        "public.orders: source 100 rows, target 99; missing in the target: id 3, 4; "
        "only in the target: id 101; different: id 7"
    )
    assert report([check])[1].endswith("DIFFERENT")


def test_the_check_fails_on_a_value_that_differs_only_in_its_type_rendering(two_tables: tuple[str, str]) -> None:
    """A timestamp off by a microsecond: the rows' text differs, so does the checksum."""
    source, target = two_tables
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("update orders set at = at + interval '1 microsecond' where id = 50")
    [check] = compare(source, target, ["public.orders"])
    assert failure([check]) == "public.orders: source 100 rows, target 100; different: id 50"


def test_a_failed_check_makes_the_command_exit_non_zero_with_the_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Any] = []

    def failing(options: DemoOptions) -> None:
        seen.append(options)
        raise DemoFailed("check FAILED: target shop_replica differs from the source: public.orders: ...")

    monkeypatch.setattr("airflow_cdc.demo.run_demo", failing)
    assert cli.main(["demo", "--kafka", "--rows", "300", "--writes", "5", "--skip-airflow"]) == 1
    assert seen == [DemoOptions(rows=300, writes=5.0, kafka=True, airflow=False)]
    assert "demo FAILED: check FAILED: target shop_replica differs" in capsys.readouterr().err
