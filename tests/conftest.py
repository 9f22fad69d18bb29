"""Session fixtures: real throwaway servers on free loopback ports (airflow_cdc.local, ADR 0002).

A server that cannot start fails the tests that need it, its program missing included (a test
that skipped for want of PostgreSQL would pass CI having checked nothing): the error names the
program and ``bash scripts/setup``, or carries the server's log tail, missing Java or jars
(``JvmPartsMissing``) included. Servers are closed at session end whatever the tests did.
``CDC_TEST_PG_DSN``, ``CDC_TEST_MYSQL_URL``, ``CDC_TEST_KAFKA_BOOTSTRAP``,
``CDC_TEST_CONNECT_URL`` and ``CDC_TEST_SPARK_MASTER`` use existing servers instead. A failed
test that used the Connect worker gets the worker's log tail in its report.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from airflow_cdc.kafka_connect import ConnectClient, ConnectRestError
from airflow_cdc.local.connect import KafkaConnectWorker
from airflow_cdc.local.jvm import SETUP_HINT, JvmPartsMissing, jars_dir
from airflow_cdc.local.kafka import KafkaBroker, SaslSsl
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.mariadb_tls import MariaDBTlsServer
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.local.postgres_tls import PostgresTlsServer
from airflow_cdc.local.process import BinaryNotFound
from airflow_cdc.local.spark_cluster import SparkStandaloneCluster
from tests import ordering, requirements

S = TypeVar(
    "S",
    PostgresServer,
    PostgresTlsServer,
    MariaDBServer,
    MariaDBTlsServer,
    KafkaBroker,
    KafkaConnectWorker,
    SparkStandaloneCluster,
)


def pytest_configure(config: pytest.Config) -> None:
    """Skips for a missing extra fail under CI=true, honest skips are listed at the end
    (``tests/requirements.py``)."""
    if not config.pluginmanager.is_registered(requirements):
        config.pluginmanager.register(requirements, "airflow-cdc-requirements")
    if not config.pluginmanager.is_registered(ordering):  # the order files go to xdist's workers
        config.pluginmanager.register(ordering, "airflow-cdc-ordering")


def _serve(service: S) -> Iterator[S]:
    try:
        try:
            service.start()
        except BinaryNotFound as exc:
            pytest.fail(f"{exc} (bash scripts/setup installs it)", pytrace=False)
        yield service
    finally:
        service.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """PostgreSQL with wal_level=logical; ``.dsn(dbname)``, ``.connect(dbname)``, ``.bindir``."""
    yield from _serve(PostgresServer.from_env())


@pytest.fixture
def pg_database(pg_server: PostgresServer) -> Iterator[str]:
    """The name of a fresh database for one test (``pg_server.dsn(pg_database)``); dropped
    afterwards with its replication slots (their WAL senders are ended), after restarting the
    server if the test left it stopped."""
    name = pg_server.create_database()
    try:
        yield name
    finally:
        if not pg_server.external:
            pg_server.start()  # no-op unless the test stopped it
        pg_server.drop_database(name)


@pytest.fixture(scope="session")
def pg_tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresTlsServer]:
    """A second PostgreSQL that takes TCP clients only with TLS and a client certificate
    (``hostssl ... cert``); ``.client_tls()`` gives the engine's ``database.ssl*`` settings."""
    yield from _serve(PostgresTlsServer(tmp_path_factory.mktemp("pg-tls")))


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDBServer]:
    """MariaDB with log_bin=ON, binlog_format=ROW, binlog_row_image=FULL; ``.connect()``."""
    yield from _serve(MariaDBServer.from_env())


@pytest.fixture(scope="session")
def mariadb_tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBTlsServer]:
    """A second MariaDB serving TLS; ``.client_tls()`` gives the engine's ``database.ssl.*``
    settings for a user created ``REQUIRE X509``."""
    yield from _serve(MariaDBTlsServer(tmp_path_factory.mktemp("mariadb-tls")))


@pytest.fixture
def mariadb_database(mariadb_server: MariaDBServer) -> Iterator[str]:
    """The name of a fresh MariaDB database for one test; dropped afterwards (after restarting
    the server if the test left it stopped)."""
    name = mariadb_server.create_database()
    try:
        yield name
    finally:
        if not mariadb_server.external:
            mariadb_server.start()  # no-op unless the test stopped it
        mariadb_server.drop_database(name)


#: A broker that was SIGKILLed may register again only once the controller has expired its old
#: registration (broker.session.timeout.ms, default 9 s); 4 s saves about 5 s per kill() + start()
#: (ADR 0002). Broker and controller share one JVM, so heartbeats never cross a network, and 4 s
#: still leaves room for a loaded machine.
FAST_CRASH_RECOVERY = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000"}


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """An Apache Kafka broker (KRaft, one node, with a data directory); ``.bootstrap_servers``."""
    yield from _serve(KafkaBroker.from_env(settings=FAST_CRASH_RECOVERY))


@pytest.fixture(scope="session")
def secure_kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A second broker that also listens with SASL_SSL (SCRAM-SHA-512 over TLS, a throwaway
    CA), started only for the tests that ask for it; ``.client_security()`` gives the settings
    that log in (``bootstrap.servers`` of that listener included)."""
    yield from _serve(KafkaBroker(sasl_ssl=SaslSsl(tmp_path_factory.mktemp("kafka-tls"))))


@pytest.fixture(scope="session")
def connect_worker(kafka_broker: KafkaBroker) -> Iterator[KafkaConnectWorker]:
    """A distributed Kafka Connect worker with Debezium's connectors, on the session broker;
    ``.url``. Shared by the session: tests give their connectors unique names."""
    yield from _serve(KafkaConnectWorker.from_env(kafka_broker))


@contextmanager
def deleting_new_connectors(client: ConnectClient) -> Iterator[ConnectClient]:
    """Deletes, on the way out, every connector that appeared meanwhile, whatever happened."""
    before = set(client.connectors())
    try:
        yield client
    finally:
        for name in set(client.connectors()) - before:
            try:
                client.delete(name)
            except ConnectRestError as exc:
                if exc.status != 404:  # deleted by the test itself meanwhile
                    raise


@pytest.fixture
def connect(connect_worker: KafkaConnectWorker) -> Iterator[ConnectClient]:
    """A REST client of the session's Connect worker; connectors the test created are deleted
    afterwards."""
    with ConnectClient(connect_worker.url) as client, deleting_new_connectors(client):
        yield client


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A failed test that used the Connect worker shows the worker's log tail: a connector's
    failure is often only there (a task's trace, a converter error, a rebalance)."""
    report = yield
    worker = getattr(item, "funcargs", {}).get("connect_worker")
    if report.failed and isinstance(worker, KafkaConnectWorker) and not worker.external:
        report.sections.append((f"Kafka Connect worker log tail ({worker.log_path})", worker.log(80)))
    return report


@pytest.fixture
def restartable_kafka_broker(kafka_broker: KafkaBroker) -> Iterator[KafkaBroker]:
    """The session broker, for a test that stops and restarts it; skips on an external Kafka.
    The broker is running again after the test (with its data), even if the test failed while
    it was down."""
    if not kafka_broker.restartable:
        pytest.skip("CDC_TEST_KAFKA_BOOTSTRAP points at an external Kafka, which the tests cannot restart")
    try:
        yield kafka_broker
    finally:
        kafka_broker.start()


@pytest.fixture
def kafka_topic_prefix() -> str:
    """A unique prefix for the topics of one test (the broker is shared by the session)."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def topic_prefix(kafka_topic_prefix: str) -> str:
    """Alias of ``kafka_topic_prefix``."""
    return kafka_topic_prefix


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local SparkSession (2 cores, no UI), shared by the session, with the connector jars
    ``scripts/setup`` resolved (Spark's Kafka source, Delta Lake) as the apply job has them."""
    from pyspark.sql import SparkSession

    from airflow_cdc.spark.apply import connector_jars

    # Python workers run this interpreter (the venv's), not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = connector_jars()
    if not jars:
        raise JvmPartsMissing(f"no Spark connector jars in {jars_dir() / 'spark'}: {SETUP_HINT}")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("airflow-cdc-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkStandaloneCluster]:
    """A Spark standalone master with one worker (2 cores, 2g), from pyspark's ``spark-class``;
    ``.master_url`` (``spark://127.0.0.1:port``) for spark-submit."""
    yield from _serve(SparkStandaloneCluster.from_env())
