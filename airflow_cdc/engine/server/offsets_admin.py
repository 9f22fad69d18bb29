"""Offset inspection, seek and reset for a stopped instance (Debezium declined this; Kafka
Connect has it since KIP-875, for stopped connectors only - the same rule here).

Changing offsets under a running engine would be overwritten at its next commit, so every
change takes the instance's state-directory lock first and is refused while it runs. (With
``offset.storage=kafka`` or ``jdbc`` the lock only sees instances on this machine.)

Positions are given the way users know them and turned into the source's offset shape by its
connector's position codec (``airflow_cdc.engine.positions``): a PostgreSQL LSN (``0/16B3748``)
becomes ``{"lsn", "lsn_proc", "lsn_commit", ...}`` - the stream restarts after it; a MySQL
source reads binlog ``file:pos`` and GTID sets the same way; anything else is given as JSON.

A seek must not pass the source server's current position: the server has not written what lies
beyond it, so the next start would resume there and skip, without a word, every change written
in between (a typo'd LSN a digit too long skips terabytes). So a position is compared with the
one the server reports (through the connector registry's ``SourceDatabase.read_position``) and
refused when it is ahead, or not ordered before it (a GTID set the server's does not contain).
A server that cannot be reached refuses the seek too, since nothing then shows the position is
safe; ``force`` skips the check, for a server that is down or a position known to be right.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_cdc.engine.connector import source_database
from airflow_cdc.engine.errors import OffsetError, RefusedError, RetriableError, SeekRefusedError
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


#: How a refusal names the way around the check (the CLI's flag; ``force=True`` in Python).
FORCE_HINT = "--force (force=True)"


def position_offset(
    props: Mapping[str, Any], position: str, *, force: bool = False, password: str | None = None
) -> Offset:
    """The offset that resumes the instance's source right after ``position``, as its users
    write positions (OffsetError, with an example, if it is not one); SeekRefusedError if it lies
    past the source server's current position, or the server cannot tell (see
    :func:`check_not_ahead`)."""
    offset = codec_for(props).parse(position)
    check_not_ahead(props, offset, force=force, password=password)
    return offset


def check_not_ahead(
    props: Mapping[str, Any], offset: Offset, *, force: bool = False, password: str | None = None
) -> None:
    """SeekRefusedError, naming both positions, unless ``offset`` is at or before the current
    position of the server the instance captures; also when that server cannot be reached.
    ``password`` (default: ``database.password``) reaches it; ``force`` skips the check. A
    source without a database to ask (``synthetic``, a connector of another package) passes."""
    database = source_database(props.get("connector.class"))
    if force or database is None:
        return
    codec = codec_for(props)
    wanted = codec.format(offset)
    secret = password if password is not None else str(props.get("database.password") or "") or None
    try:
        current_text = database.read_position(props, secret)
    except RetriableError as exc:
        raise SeekRefusedError(
            f"cannot check position {wanted} against the source server's current position: {exc}; "
            f"make the server reachable with the instance's database.* settings, or pass {FORCE_HINT} "
            "to seek without the check"
        ) from exc
    order = codec.compare(offset, codec.parse(current_text))
    if order is not None and order <= 0:
        return
    where = f"the source server's current position {current_text}"
    why = (
        f"is ahead of {where}"
        if order is not None
        else f"cannot be placed at or before {where} (it names transactions the server has not written, "
        "or it is written in another form than the server's)"
    )
    raise SeekRefusedError(
        f"position {wanted} {why}: the next start would skip every change the server writes until it gets "
        f"there; seek to {current_text} or earlier, written as the server reports positions, or pass "
        f"{FORCE_HINT} to seek without the check"
    )


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
