import decimal
import json
import os
import threading

import pytest

from airflow_cdc.engine import JsonSerializer, OffsetError, SerializationError, SourceRecord
from airflow_cdc.engine.storage import FileOffsetStore, MemoryOffsetStore, connect_key


def test_file_store_round_trips_in_kafka_connect_key_format(tmp_path):
    path = tmp_path / "state" / "offsets.json"
    store = FileOffsetStore("inventory", path)
    store.start()
    store.write([({"server": "db1"}, {"lsn": 10, "txId": 7})])
    store.write([({"server": "db2"}, {"lsn": 3})])
    reopened = FileOffsetStore("inventory", path)
    reopened.start()
    assert reopened.read({"server": "db1"}) == {"lsn": 10, "txId": 7}
    assert sorted(p["server"] for p, _ in reopened.entries()) == ["db1", "db2"]
    on_disk = json.loads(path.read_text())
    assert '["inventory",{"server":"db1"}]' in on_disk
    assert connect_key("inventory", {"server": "db1"}) == '["inventory",{"server":"db1"}]'


def test_file_store_leaves_no_temporary_files_and_survives_concurrent_writers(tmp_path):
    store = FileOffsetStore("e", tmp_path / "offsets.json")
    store.start()

    def writer(task):
        for seq in range(50):
            store.write([({"task": task}, {"seq": seq})])

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert os.listdir(tmp_path) == ["offsets.json"]
    reopened = FileOffsetStore("e", tmp_path / "offsets.json")
    reopened.start()
    assert all(reopened.read({"task": t}) == {"seq": 49} for t in range(4))


def test_corrupt_offset_file_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "offsets.json"
    path.write_text("{not json")
    with pytest.raises(OffsetError, match=r"offsets\.json is not valid JSON.*remove it"):
        FileOffsetStore("e", path).start()


def test_memory_store_isolates_engines_by_name():
    store = MemoryOffsetStore("a")
    store.write([({"p": 1}, {"seq": 1})])
    assert store.read({"p": 1}) == {"seq": 1}
    assert store.read({"p": 2}) is None


def test_json_serializer_writes_key_and_envelope_and_keeps_tombstones():
    serializer = JsonSerializer()
    record = SourceRecord("t", {"id": 1}, {"op": "c", "after": {"price": decimal.Decimal("1.50")}}, {}, {})
    out = serializer.serialize(record)
    assert out.key == b'{"id":1}'
    assert json.loads(out.value) == {"op": "c", "after": {"price": "1.50"}}
    assert serializer.serialize(record.replace(value=None)).value is None


def test_unserializable_values_raise_a_serialization_error_naming_the_record():
    record = SourceRecord("shop.orders", {"id": 1}, {"after": object()}, {}, {"lsn": 5})
    with pytest.raises(SerializationError, match=r"shop\.orders.*lsn"):
        JsonSerializer().serialize(record)


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_delete_removes_one_partition_and_is_a_no_op_for_an_unknown_one(tmp_path, kind):
    def open_store():
        store = FileOffsetStore("e", tmp_path / "offsets.json") if kind == "file" else memory
        store.start()
        return store

    memory = MemoryOffsetStore("e")
    store = open_store()
    store.write([({"p": 1}, {"seq": 1}), ({"p": 2}, {"seq": 2})])
    store.delete({"p": 1})
    store.delete({"p": 3})
    reopened = open_store()
    assert reopened.read({"p": 1}) is None
    assert reopened.entries() == [({"p": 2}, {"seq": 2})]


def test_a_postgresql_jdbc_url_takes_pgjdbcs_tls_parameters():
    from airflow_cdc.engine.storage.jdbc import parse_jdbc_url

    url = parse_jdbc_url(
        "jdbc:postgresql://db:5432/cdc?sslmode=verify-full&sslrootcert=/ca.pem&sslcert=/c.crt&sslkey=/c.key"
    )
    assert url.sslmode == "verify-full"
    assert dict(url.tls) == {"sslrootcert": "/ca.pem", "sslcert": "/c.crt", "sslkey": "/c.key"}
    with pytest.raises(ValueError, match="sslcert"):
        parse_jdbc_url("jdbc:mysql://db:3306/cdc?sslcert=/c.crt")


def test_debeziums_mysql_ssl_settings_as_pymysql_arguments():
    from airflow_cdc.engine.mysql_client import REQUIRE_TLS, tls_params

    assert tls_params({}) == {}
    assert tls_params({"database.ssl.mode": "disabled"}) == {"ssl_disabled": True}
    assert tls_params({"database.ssl.mode": "required"}) == {
        "ssl": {"check_hostname": False, "verify_mode": False},
        REQUIRE_TLS: True,
    }
    assert tls_params(
        {
            "database.ssl.mode": "verify_identity",
            "database.ssl.truststore": "/ca.pem",
            "database.ssl.keystore": "/client.pem",
            "database.ssl.keystore.password": "kp",
        }
    ) == {
        "ssl": {"check_hostname": True, "verify_mode": True, "ca": "/ca.pem", "cert": "/client.pem", "password": "kp"},
        REQUIRE_TLS: True,
    }
