"""Source connectors: PostgreSQL, MySQL/MariaDB, and a synthetic one for tests and benchmarks."""
