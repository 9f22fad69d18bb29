"""MySQL and MariaDB: the row binlog through mysql-replication, GTID and binlog positions."""
