"""Offset inspection, seek and reset for a stopped instance (Debezium declined this; Kafka
Connect has it since KIP-875, for stopped connectors only - the same rule here).

Changing offsets under a running engine would be overwritten at its next commit, so every
change takes the instance's state-directory lock first and is refused while it runs. (With
``offset.storage=kafka`` or ``jdbc`` the lock only sees instances on this machine.)

Positions are given the way users know them and turned into the source's offset shape by its
connector's position codec (``airflow_cdc.engine.positions``): a PostgreSQL LSN (``0/16B3748``)
becomes ``{"lsn", "lsn_proc", "lsn_commit", ...}`` - the stream restarts after it; a MySQL
source will read binlog ``file:pos`` and GTID sets the same way; anything else is given as JSON.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_cdc.engine.errors import OffsetError, RefusedError
from airflow_cdc.engine.positions import codec_for
from airflow_cdc.engine.records import Offset, Partition
from airflow_cdc.engine.server.instance_files import offsets_lock, state_dir, validated
from airflow_cdc.engine.storage import OffsetStore, build_offset_store


@contextlib.contextmanager
def stopped_store(props: Mapping[str, Any]) -> Iterator[OffsetStore]:
    """The instance's offset store, started, while the instance is held stopped."""
    directory = state_dir(props)
    try:
        with offsets_lock(directory):
            config = validated(props)  # the store the instance would use; no engine is built
            store = build_offset_store(config.name, config.engine)
            store.start()
            try:
                yield store
            finally:
                store.stop()
    except BlockingIOError:
        raise RefusedError(
            f"instance {props.get('name')!r} is running: stop it first (airflow-cdc engine stop --config ...); "
            "offsets changed under a running engine would be overwritten at its next commit"
        ) from None


def show(props: Mapping[str, Any]) -> list[dict[str, Any]]:
    with stopped_store(props) as store:
        return [{"partition": p, "offset": o} for p, o in store.entries()]


def position_offset(props: Mapping[str, Any], position: str) -> Offset:
    """The offset that resumes the instance's source right after ``position``, as its users
    write positions (OffsetError, with an example, if it is not one)."""
    return codec_for(props).parse(position)


def _choose(store: OffsetStore, partition: Partition | None) -> Partition:
    if partition is not None:
        return partition
    known = [p for p, _ in store.entries()]
    if len(known) == 1:
        return known[0]
    raise OffsetError(
        f"the store holds {len(known)} partitions: say which with --partition, one of "
        + ", ".join(str(dict(p)) for p in known)
    )


def set_offset(props: Mapping[str, Any], offset: Offset, partition: Partition | None = None) -> dict[str, Any]:
    with stopped_store(props) as store:
        chosen = _choose(store, partition)
        before = store.read(chosen)
        store.write([(chosen, offset)])
        return {"partition": chosen, "before": before, "offset": store.read(chosen)}


def reset(props: Mapping[str, Any], partition: Partition | None = None) -> list[dict[str, Any]]:
    """Forget the offsets of one partition, or of every partition: the next start begins as a
    first start (snapshot.mode decides: a new snapshot by default)."""
    with stopped_store(props) as store:
        chosen = [partition] if partition is not None else [p for p, _ in store.entries()]
        removed = []
        for one in chosen:
            removed.append({"partition": one, "offset": store.read(one)})
            store.delete(one)
        return removed
