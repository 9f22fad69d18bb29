"""Regenerates pgoutput_recorded.json: real pgoutput bytes from a throwaway PostgreSQL.

Run from the repository root: .venv/bin/python tests/unit/data/record_pgoutput.py
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from airflow_cdc.local.postgres import PostgresServer

SQL = [
    "create type mood as enum ('sad', 'happy')",
    "create table rec (id int primary key, note text, m mood)",
    "alter table rec replica identity full",
    "create publication rec_pub for table rec",
    "select pg_create_logical_replication_slot('rec_slot', 'pgoutput')",
    "insert into rec values (1, 'hello', 'happy'), (2, null, 'sad')",
    "update rec set note = 'changed' where id = 1",
    "delete from rec where id = 2",
    "truncate rec",
    "select pg_logical_emit_message(false, 'airflow-cdc-test', 'payload')",
]

with PostgresServer() as server, server.connect() as conn:
    for statement in SQL:
        conn.execute(statement)
    rows = conn.execute(
        "select lsn::text, data from pg_logical_slot_get_binary_changes('rec_slot', null, null, "
        "'proto_version', '1', 'publication_names', 'rec_pub', 'messages', 'true')"
    ).fetchall()
    out = [{"lsn": lsn, "hex": bytes(data).hex()} for lsn, data in rows]
    Path(__file__).with_name("pgoutput_recorded.json").write_text(
        json.dumps({"server_version": conn.info.server_version, "messages": out}, indent=1) + "\n"
    )
    print(f"recorded {len(out)} messages")
