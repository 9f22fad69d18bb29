"""Real, throwaway servers for the tests: PostgreSQL, MariaDB, a Kafka-protocol broker.

Plain classes (no pytest) so benchmarks and scripts can use them too; ``tests/conftest.py``
wraps them in session fixtures. Each also accepts an existing server from the environment.
"""
