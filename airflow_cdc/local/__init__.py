"""Real, throwaway local servers: PostgreSQL, MariaDB, an Apache Kafka broker and a Kafka Connect
worker with Debezium.

They ship in the airflow-cdc wheel on purpose: ``airflow-cdc demo`` runs on them, and so do the
benchmarks and the tests (``tests/conftest.py`` wraps them in session fixtures). They are for
development, demos and tests - throwaway servers with fsync off and trust authentication -
never for data anyone keeps. Plain classes, no pytest; the start, stop and cleanup they share
live in :class:`~airflow_cdc.local.process.LocalServer`. ``X.from_env()`` uses an existing server named by an
environment variable (``CDC_TEST_PG_DSN``, ``CDC_TEST_MYSQL_URL``, ``CDC_TEST_KAFKA_BOOTSTRAP``,
``CDC_TEST_CONNECT_URL``) instead of starting one. See docs/adr/0002-test-services.md.
"""

from airflow_cdc.local.connect import KafkaConnectWorker
from airflow_cdc.local.kafka import KafkaBroker
from airflow_cdc.local.mariadb import MariaDBServer
from airflow_cdc.local.postgres import PostgresServer
from airflow_cdc.local.process import BinaryNotFound, ServiceError

__all__ = ["BinaryNotFound", "KafkaBroker", "KafkaConnectWorker", "MariaDBServer", "PostgresServer", "ServiceError"]
