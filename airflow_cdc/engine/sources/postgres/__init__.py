"""PostgreSQL source: pgoutput logical decoding over psycopg 3."""
