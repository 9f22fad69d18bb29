"""The test servers are real and set up the way change-data-capture needs them (ADR 0002)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.ports import port_open
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.local.process import sweep_stale

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


# --- PostgreSQL --------------------------------------------------------------------------


def test_postgres_decodes_with_pgoutput_through_a_slot(pg_server: PostgresServer, pg_database: str) -> None:
    with pg_server.connect(pg_database) as conn:
        settings = conn.execute(
            "select current_setting('wal_level'), current_setting('max_replication_slots')::int, "
            "current_setting('max_wal_senders')::int"
        ).fetchone()
        assert settings is not None
        assert settings[0] == "logical"
        assert min(settings[1], settings[2]) >= 10
        conn.execute("create table t (id int primary key, v text)")
        conn.execute("create publication pub for table t")
        conn.execute("select pg_create_logical_replication_slot('s1', 'pgoutput')")
        conn.execute("insert into t values (1, 'a'), (2, 'b')")
        messages = conn.execute(
            "select substr(data, 1, 1) from pg_logical_slot_peek_binary_changes("
            "'s1', null, null, 'proto_version', '1', 'publication_names', 'pub')"
        ).fetchall()
    # Begin, Relation, Insert, Insert, Commit (the slot is dropped with the database).
    assert [m[0] for m in messages] == [b"B", b"R", b"I", b"I", b"C"]


def test_postgres_streams_to_pg_recvlogical_over_a_replication_connection(
    pg_server: PostgresServer, pg_database: str, tmp_path: Path
) -> None:
    recvlogical = pg_server.program("pg_recvlogical")
    dsn = pg_server.dsn(pg_database)
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table t (id int primary key)")
        conn.execute("create publication pub for table t")
    base = [str(recvlogical), "--dbname", dsn, "--slot", "s2", "--no-password"]
    subprocess.run([*base, "--create-slot", "--plugin", "pgoutput"], check=True, capture_output=True, timeout=30)
    with pg_server.connect(pg_database) as conn:
        conn.execute("insert into t select generate_series(1, 10)")
        end = conn.execute("select pg_current_wal_lsn()::text").fetchone()
    assert end is not None
    out = tmp_path / "changes.bin"
    stream = [*base, "--start", "--endpos", end[0], "--file", str(out), "--no-loop"]
    stream += ["--option", "proto_version=1", "--option", "publication_names=pub"]
    done = subprocess.run(stream, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0
    # A replication-mode connection answers replication commands.
    with pg_server.connect(pg_database, replication="database") as conn:
        system = conn.execute("IDENTIFY_SYSTEM").fetchone()
    assert system is not None and system[3] == pg_database


def test_pg_database_teardown_ends_an_active_walsender_and_drops_its_slot(pg_server: PostgresServer) -> None:
    name = pg_server.create_database()
    with pg_server.connect(name) as conn:
        conn.execute("create publication pub for all tables")
    recvlogical = [str(pg_server.program("pg_recvlogical")), "--dbname", pg_server.dsn(name), "--slot", "s3"]
    subprocess.run([*recvlogical, "--create-slot", "--plugin", "pgoutput"], check=True, capture_output=True)
    streaming = subprocess.Popen(
        [*recvlogical, "--start", "--file", "-", "--no-loop", "-o", "proto_version=1", "-o", "publication_names=pub"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with pg_server.connect() as conn:
            deadline = time.monotonic() + 30
            while conn.execute("select active from pg_replication_slots where slot_name = 's3'").fetchone() != (True,):
                assert time.monotonic() < deadline, "pg_recvlogical never became active"
                time.sleep(0.05)
        pg_server.drop_database(name)
        assert streaming.wait(30) != 0  # its WAL sender was terminated
    finally:
        streaming.kill()
        streaming.wait()
    with pg_server.connect() as conn:
        assert conn.execute("select count(*) from pg_replication_slots where slot_name = 's3'").fetchone() == (0,)
        assert conn.execute("select count(*) from pg_database where datname = %s", (name,)).fetchone() == (0,)


def test_postgres_restarts_on_the_same_port_with_its_data(pg_server: PostgresServer, pg_database: str) -> None:
    if pg_server.external:
        pytest.skip("CDC_TEST_PG_DSN points at an external server, which the tests cannot restart")
    with pg_server.connect(pg_database) as conn:
        conn.execute("create table kept (id int)")
        conn.execute("insert into kept values (42)")
    port = pg_server.port
    pg_server.stop()
    assert not pg_server.running and not port_open(port)
    pg_server.start()
    assert pg_server.port == port
    with pg_server.connect(pg_database) as conn:
        assert conn.execute("select id from kept").fetchall() == [(42,)]


# --- MariaDB -----------------------------------------------------------------------------


def test_mariadb_writes_a_full_row_binlog(mariadb_server: MariaDBServer) -> None:
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(
            "show global variables where variable_name in "
            "('log_bin', 'binlog_format', 'binlog_row_image', 'binlog_row_metadata', 'server_id')"
        )
        settings = dict(cur.fetchall())
        cur.execute("show master status")
        status = cur.fetchone()
    assert settings["log_bin"] == "ON"
    assert settings["binlog_format"] == "ROW"
    assert settings["binlog_row_image"] == "FULL"
    if not mariadb_server.external:
        assert settings["binlog_row_metadata"] == "NO_LOG"  # the server's default: the source needs no more
        assert settings["server_id"] == "1"
    assert status is not None and status[0]  # the current binlog file


@pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning")
def test_mariadb_binlog_rows_read_back(mariadb_server: MariaDBServer, mariadb_database: str) -> None:
    from pymysqlreplication.row_event import WriteRowsEvent  # the mysql extra (scripts/setup installs it)

    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cur:
        # From here on, by GTID (mysql-replication ignores file/position on MariaDB): the session
        # server's earlier binlog holds other tests' events, which this test has no business in.
        cur.execute("select @@gtid_binlog_pos")
        (start,) = cur.fetchone()
        cur.execute("create table t (id int primary key, name varchar(20))")
        cur.execute("insert into t values (1, 'one'), (2, 'two')")
    reader = mariadb_server.binlog_reader(
        server_id=1000 + os.getpid() % 1000,
        blocking=False,
        only_events=[WriteRowsEvent],
        only_schemas=[mariadb_database],
        **({"auto_position": start} if start else {}),
    )
    try:
        # Values by position: with the server's default binlog_row_metadata the table map names
        # no columns (the engine takes names and meanings from its schema history).
        rows = [tuple(row["values"].values()) for event in reader for row in event.rows]
    finally:
        reader.close()
    assert rows == [(1, "one"), (2, "two")]


def test_the_binlog_reader_without_the_mysql_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_cdc.engine.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "pymysqlreplication", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'airflow-cdc\[mysql\]'"):
        MariaDBServer().binlog_reader(server_id=1)  # fails before connecting


def test_mariadb_restarts_on_the_same_port_with_its_data(mariadb_server: MariaDBServer, mariadb_database: str) -> None:
    if mariadb_server.external:
        pytest.skip("CDC_TEST_MYSQL_URL points at an external server, which the tests cannot restart")
    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cur:
        cur.execute("create table kept (id int)")
        cur.execute("insert into kept values (42)")
    port = mariadb_server.port
    mariadb_server.stop()
    assert not mariadb_server.running and not port_open(port)
    mariadb_server.start()
    assert mariadb_server.port == port
    with mariadb_server.connect(database=mariadb_database) as conn, conn.cursor() as cur:
        cur.execute("select id from kept")
        assert cur.fetchall() == ((42,),)


# --- Apache Kafka broker ---------------------------------------------------------------------


def _create_topic(broker: KafkaBroker, topic: str, partitions: int = 1) -> None:
    admin = broker.admin()
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def _produce(broker: KafkaBroker, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """Send and wait for every acknowledgement (acks=all): what is sent is in the broker's log."""
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=5
    )
    try:
        for key, value in records:
            producer.send(topic, key=key, value=value)
        producer.flush(30)
    finally:
        producer.close(10)


def _read_all(broker: KafkaBroker, topic: str, expected: int) -> list[tuple[int, bytes, bytes]]:
    """Every record of ``topic`` as ``(partition, key, value)``, in offset order per partition,
    read without a group until ``expected`` arrived (or 30 s passed)."""
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    records: list[tuple[int, bytes, bytes]] = []
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        deadline = time.monotonic() + 30
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend((m.partition, m.key, m.value) for m in batch)
    finally:
        consumer.close()
    return records


def _end_offsets(broker: KafkaBroker, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        return {tp.partition: end for tp, end in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def _committed(broker: KafkaBroker, group: str, topic: str, partitions: int) -> dict[int, OffsetAndMetadata]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p), metadata=True) for p in range(partitions)}
    finally:
        consumer.close()


def test_kafka_round_trips_keyed_idempotent_messages_through_a_group(
    kafka_broker: KafkaBroker, kafka_topic_prefix: str
) -> None:
    topic = f"{kafka_topic_prefix}.round-trip"
    _create_topic(kafka_broker, topic, partitions=3)
    sent = [(f"k{i % 5}".encode(), f"v{i}".encode()) for i in range(60)]
    _produce(kafka_broker, topic, sent)

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_broker.bootstrap_servers,
        group_id=f"{kafka_topic_prefix}.group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    received = []
    try:
        deadline = time.monotonic() + 60
        while len(received) < len(sent) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                received.extend(batch)
        consumer.commit()
        committed = {tp: consumer.committed(tp) for tp in consumer.assignment()}
    finally:
        consumer.close()

    assert sorted((m.key, m.value) for m in received) == sorted(sent)
    by_key: dict[bytes, list[tuple[int, bytes]]] = defaultdict(list)
    for m in received:
        by_key[m.key].append((m.partition, m.value))
    for key, entries in by_key.items():
        assert len({partition for partition, _ in entries}) == 1, f"key {key!r} spread over partitions"
        assert [value for _, value in entries] == [v for k, v in sent if k == key]  # order kept per key
    assert sum(committed.values()) == len(sent)


def test_kafka_end_offsets_count_every_record_produced(kafka_broker: KafkaBroker, kafka_topic_prefix: str) -> None:
    """ListOffsets answers the log end, multi-record batches included, and agrees with the high
    watermark a fetch reports: lag and end-of-topic checks may use either."""
    topic = f"{kafka_topic_prefix}.ends"
    _create_topic(kafka_broker, topic)
    for size in (10, 3, 1, 7):  # one producer and one flush each: batches of several records
        _produce(kafka_broker, topic, [(b"k", f"v{i}".encode()) for i in range(size)])
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, enable_auto_commit=False)
    try:
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.end_offsets([tp])[tp] == 21
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        fetched = 0
        deadline = time.monotonic() + 30
        while fetched < 21 and time.monotonic() < deadline:
            fetched += sum(len(batch) for batch in consumer.poll(timeout_ms=200).values())
        assert fetched == 21
        assert consumer.highwater(tp) == 21
    finally:
        consumer.close()

    spread = f"{kafka_topic_prefix}.ends-spread"
    _create_topic(kafka_broker, spread, partitions=3)
    _produce(kafka_broker, spread, [(f"k{i}".encode(), b"v") for i in range(50)])
    assert sum(_end_offsets(kafka_broker, spread).values()) == 50


class _Filled:
    """A topic with keyed records and a consumer group that committed part of it, metadata
    included: what a broker restart must keep."""

    partitions = 3

    def __init__(self, broker: KafkaBroker, prefix: str) -> None:
        self.topic, self.group = f"{prefix}.kept", f"{prefix}.kept-group"
        _create_topic(broker, self.topic, partitions=self.partitions)
        self.sent = [(f"k{i % 7}".encode(), f"v{i}".encode()) for i in range(90)]
        _produce(broker, self.topic, self.sent)
        self.records = sorted(_read_all(broker, self.topic, len(self.sent)))
        assert len(self.records) == len(self.sent)
        self.ends = _end_offsets(broker, self.topic)
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers, group_id=self.group, enable_auto_commit=False
        )
        try:
            consumer.commit(
                {
                    TopicPartition(self.topic, p): OffsetAndMetadata(end // 2, f"meta-{p}", -1)
                    for p, end in self.ends.items()
                }
            )
        finally:
            consumer.close()
        self.committed = _committed(broker, self.group, self.topic, self.partitions)
        assert [c.metadata for c in self.committed.values()] == ["meta-0", "meta-1", "meta-2"]

    def assert_kept(self, broker: KafkaBroker) -> None:
        admin = broker.admin()
        try:
            assert self.topic in admin.list_topics()
        finally:
            admin.close()
        assert _end_offsets(broker, self.topic) == self.ends
        assert sorted(_read_all(broker, self.topic, len(self.sent))) == self.records
        committed = _committed(broker, self.group, self.topic, self.partitions)
        assert {p: (c.offset, c.metadata) for p, c in committed.items()} == {
            p: (c.offset, c.metadata) for p, c in self.committed.items()
        }


def test_kafka_broker_restarts_on_the_same_port_with_its_data(
    restartable_kafka_broker: KafkaBroker, kafka_topic_prefix: str
) -> None:
    broker = restartable_kafka_broker
    filled = _Filled(broker, kafka_topic_prefix)
    port = broker.port
    broker.stop()
    assert not broker.running and not port_open(port)
    broker.start()
    assert broker.port == port
    filled.assert_kept(broker)
    _produce(broker, filled.topic, [(b"k0", b"after restart")])  # and it takes new records
    assert sum(_end_offsets(broker, filled.topic).values()) == len(filled.sent) + 1


def test_a_killed_kafka_broker_recovers_its_log(restartable_kafka_broker: KafkaBroker, kafka_topic_prefix: str) -> None:
    """SIGKILL, no controlled shutdown: every acknowledged record and committed offset is still
    there after the broker recovered its log."""
    broker = restartable_kafka_broker
    filled = _Filled(broker, kafka_topic_prefix)
    port = broker.port
    broker.kill()
    assert not broker.running
    broker.start()
    assert broker.port == port
    filled.assert_kept(broker)


def test_a_first_consumer_group_join_is_fast(kafka_broker: KafkaBroker, kafka_topic_prefix: str) -> None:
    """A new group gets its records within seconds (group.initial.rebalance.delay.ms=0), not
    after some fraction of the session timeout: the long Kafka default session timeout is set
    here so that such a wait could not hide under the bound."""
    topic = f"{kafka_topic_prefix}.join"
    _create_topic(kafka_broker, topic)
    _produce(kafka_broker, topic, [(b"k", b"v")])
    started = time.monotonic()
    member = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_broker.bootstrap_servers,
        group_id=f"{kafka_topic_prefix}.join-group",
        auto_offset_reset="earliest",
        session_timeout_ms=45_000,
    )
    try:
        received = 0
        while not received and time.monotonic() - started < 60:
            received = sum(len(batch) for batch in member.poll(timeout_ms=100).values())
        joined_after = time.monotonic() - started
    finally:
        member.close()
    assert received == 1
    assert joined_after < 10, f"the first join took {joined_after:.1f}s"


# --- cleanup after a killed run ------------------------------------------------------------


def test_a_broker_left_by_a_killed_process_is_swept_by_the_next_run() -> None:
    script = (
        "import sys, time\n"
        "from airflow_cdc.local.kafka import KafkaBroker\n"
        "broker = KafkaBroker().start()\n"
        "print(broker.directory, broker._process.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        directory, pid = owner.stdout.readline().split()
    finally:
        owner.kill()  # like SIGKILL of a whole test run: no finalizer, no atexit
        owner.wait()
    os.kill(int(pid), 0)  # the orphaned broker still runs
    assert Path(directory).is_dir()

    assert Path(directory) in sweep_stale("kafka", signal.SIGTERM)
    assert not Path(directory).exists()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "Z" not in _state(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists() or "Z" in _state(int(pid))


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
