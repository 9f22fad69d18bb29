"""Real, throwaway servers for the tests: PostgreSQL, MariaDB and a Kafka-protocol broker.

Plain classes (no pytest) so benchmarks and scripts can use them too; ``tests/conftest.py``
wraps them in session fixtures. ``X.from_env()`` uses an existing server named by an
environment variable (``CDC_TEST_PG_DSN``, ``CDC_TEST_MYSQL_URL``, ``CDC_TEST_KAFKA_BOOTSTRAP``)
instead of starting one. See docs/adr/0002-test-services.md.
"""

from tests.services.kafka import KafkaBroker
from tests.services.mariadb import MariaDBServer
from tests.services.postgres import PostgresServer
from tests.services.process import BinaryNotFound, ServiceError

__all__ = ["BinaryNotFound", "KafkaBroker", "MariaDBServer", "PostgresServer", "ServiceError"]
