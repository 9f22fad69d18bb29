"""The optional mypyc build of the stream's hot modules (ADR 0033): loaded only while every source
it was made from is unchanged, never mixed with pure modules, off with AIRFLOW_CDC_COMPILED=0;
and where a build exists, compiled and pure modules decode a stream to the same bytes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_cdc.engine.sources.postgres import compiled

ROOT = Path(__file__).resolve().parents[2]


def write_build(build: Path, **changes) -> None:
    build.mkdir(exist_ok=True)
    extensions = {f"{compiled.PACKAGE}.{m}": f"{m}.so" for m in compiled.MODULES}
    for file in extensions.values():
        (build / file).write_bytes(b"")
    manifest = {
        "python": sys.implementation.cache_tag,
        "sources": {m: compiled.source_digest(compiled.module_source(m)) for m in compiled.MODULES},
        "extensions": extensions,
    }
    manifest.update(changes)
    (build / compiled.MANIFEST).write_text(json.dumps(manifest))


def test_a_build_of_the_current_sources_is_loaded(tmp_path):
    write_build(tmp_path)
    found = compiled.current_build(tmp_path)
    assert found is not None
    assert found[f"{compiled.PACKAGE}.pgoutput"] == tmp_path / "pgoutput.so"


def test_no_build_means_the_pure_modules(tmp_path):
    assert compiled.current_build(tmp_path) is None
    (tmp_path / compiled.MANIFEST).write_text("not json")
    assert compiled.current_build(tmp_path) is None


def test_one_changed_source_disables_the_whole_build(tmp_path, caplog):
    sources = {m: compiled.source_digest(compiled.module_source(m)) for m in compiled.MODULES}
    write_build(tmp_path, sources={**sources, "changes": "0" * 64})
    assert compiled.current_build(tmp_path) is None
    assert "changes.py changed" in caplog.text


def test_a_build_for_another_python_or_module_list_is_not_loaded(tmp_path):
    write_build(tmp_path, python="cpython-99")
    assert compiled.current_build(tmp_path) is None
    write_build(tmp_path, python=sys.implementation.cache_tag, sources={"pgoutput": "x"})
    assert compiled.current_build(tmp_path) is None


def test_a_missing_extension_file_disables_the_build(tmp_path):
    write_build(tmp_path)
    (tmp_path / "changes.so").unlink()
    assert compiled.current_build(tmp_path) is None


@pytest.mark.parametrize(("value", "on"), [("0", False), ("off", False), ("false", False), ("1", True), ("", True)])
def test_the_switch(monkeypatch, value, on):
    monkeypatch.setenv(compiled.ENV_VAR, value)
    assert compiled.enabled() is on


#: Decodes hand-built pgoutput (every column type the stream's converters handle on the text
#: path) through a change builder and prints the serialized events.
DECODE_SCRIPT = r"""
import struct, sys
from airflow_cdc.engine import JsonSerializer
from airflow_cdc.engine.sources.postgres import compiled, pgoutput
from airflow_cdc.engine.sources.postgres.catalog import TableFilter
from airflow_cdc.engine.sources.postgres.transactions import change_builder
from airflow_cdc.engine.sources.postgres.types import TypeInfo, ValueModes

TYPES = {23: ("int4", "N"), 25: ("text", "S"), 1700: ("numeric", "N"), 1184: ("timestamptz", "D"),
         1114: ("timestamp", "D"), 1082: ("date", "D"), 701: ("float8", "N"), 16: ("bool", "B"),
         17: ("bytea", "U"), 1186: ("interval", "T"), 1083: ("time", "D")}
class Catalog:
    def type(self, oid): return TypeInfo(oid, TYPES[oid][0], TYPES[oid][1], "b")
    def primary_key(self, oid): return ["id"]
    def not_null_columns(self, oid): return {"id": None}
def s(text): return text.encode() + b"\0"
def tup(*values):
    out = struct.pack("!h", len(values))
    for v in values:
        out += b"n" if v is None else b"t" + struct.pack("!i", len(v)) + v
    return out
columns = [("id", 23, -1), ("name", 25, -1), ("amount", 1700, (10 << 16 | 2) + 4), ("plain", 1700, -1),
           ("at", 1184, -1), ("ts", 1114, 3), ("day", 1082, -1), ("ratio", 701, -1), ("ok", 16, -1),
           ("raw", 17, -1), ("span", 1186, -1), ("clock", 1083, -1)]
relation = b"R" + struct.pack("!I", 16384) + s("public") + s("t") + b"d" + struct.pack("!h", len(columns))
for name, oid, mod in columns:
    relation += bytes([name == "id"]) + s(name) + struct.pack("!Ii", oid, mod)
row = [b"1", b"caf\xc3\xa9", b"-12.50", b"1.2300", b"2024-02-29 13:37:03.5+00", b"2024-01-01 00:00:00.12",
       b"2024-02-29", b"NaN", b"t", b"\\x00ff", b"P1Y2M3DT4H5M6.7S", b"23:59:59.999999"]
new = [b"2", *row[1:3], None, *row[4:]]
messages = [
    b"B" + struct.pack("!QqI", 100, 700_000_000_000_000, 7), relation,
    b"I" + struct.pack("!I", 16384) + b"N" + tup(*row),
    b"U" + struct.pack("!I", 16384) + b"O" + tup(*row) + b"N" + tup(*new),
    b"U" + struct.pack("!I", 16384) + b"N" + tup(*new),
    b"D" + struct.pack("!I", 16384) + b"K" + tup(b"2", *[None] * 11),
    b"C" + struct.pack("!BQQq", 0, 100, 200, 700_000_000_000_000),
]
out = []
for topic in (None, "bench.transaction"):
    builder = change_builder(topic, server="bench", database="db", partition={"server": "bench"},
        topic=lambda schema, table: f"bench.{schema}.{table}", catalog=Catalog(), modes=ValueModes(),
        filters=TableFilter([], [], []), tombstones=True, skipped=frozenset(), resume=None)
    for lsn, raw in enumerate(messages, 1000):
        for record in builder.handle(pgoutput.decode(raw), lsn):
            if record.topic:
                record.value is None or record.value.update(ts_ms=0, ts_us=0, ts_ns=0)
                done = JsonSerializer().serialize(record)
                out.append(repr((done.topic, done.key, done.value, sorted(record.offset.items()))))
print(compiled.active())
print("\n".join(out))
"""


def decoded(compiled_on: bool) -> list[str]:
    env = {**os.environ, compiled.ENV_VAR: "1" if compiled_on else "0", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", DECODE_SCRIPT], env=env, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def test_compiled_and_pure_modules_write_the_same_bytes():
    if compiled.current_build() is None:
        pytest.skip("no current mypyc build (scripts/build_compiled): only the pure modules exist here")
    pure, fast = decoded(False), decoded(True)
    assert pure[0] == "False" and fast[0] == "True"
    assert len(pure) > 8
    assert fast[1:] == pure[1:]
