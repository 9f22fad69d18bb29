"""The driver's half of the transaction-consistent split (ADR 0023): which source transactions
apply now, which wait, and whether the first waiting one has stalled.

``transactions.split`` runs one Spark aggregate over the batch (per source transaction and
topic: its END's position and per-table counts, the distinct events seen) and hands the rows
here: one row per transaction and table, small next to the batch, so the decisions are plain
Python instead of a Spark job each.

A *stall*: a transaction whose END is known but some of whose events will never come, because the
job started past them (``starting_offsets=latest``, retention deleted them, the offsets were
moved). It stays incomplete, and in commit order everything after it waits behind it - forever,
silently. Its missing events would come before those of later transactions on the same topic
(one producer writes a table's events in commit order), so the evidence is: on a table where the
blocking transaction lacks events, the job has read events of transactions that committed after
it, and the blocker gained none for ``transaction_stall_batches`` batches in a row. A healthy END
that merely arrives before its events (Connect's producer does not order across partitions) has
no such evidence: the table's next events are its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.engine.errors import ConfigError, ConfigProblem

#: Default of ``transaction_stall_batches``: batches in a row with the evidence above before the job
#: stops. More than one so that a table topic with several partitions, whose partitions Spark
#: reads unevenly, can still deliver the blocker's events from a lagging partition.
STALL_BATCHES = 10


def tail(name: str) -> str:
    """A table's ``schema.table`` / ``db.table``: the last two parts of a topic or of an END's
    ``data_collection`` (``db.schema.table`` or ``schema.table`` for PostgreSQL)."""
    return ".".join(name.split(".")[-2:])


@dataclass
class Transaction:
    txid: str
    #: The END's (partition, offset) on the transaction topic: the commit order.
    end: tuple[int, int] | None = None
    #: Events the END counts per table this job reads (``schema.table``).
    expected: dict[str, int] = field(default_factory=dict)
    #: Distinct events seen per table.
    seen: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.end is not None and sum(self.seen.values()) >= sum(self.expected.values())

    def missing(self) -> dict[str, tuple[int, int]]:
        """Tables short of events: seen, expected."""
        return {t: (self.seen.get(t, 0), n) for t, n in sorted(self.expected.items()) if self.seen.get(t, 0) < n}


@dataclass
class Plan:
    #: Transactions (ids) whose events and END wait for a later batch.
    held: set[str]
    #: Of those, the ones whose END is held too (an END counting none of the job's tables is not).
    held_ends: set[str]
    #: The first incomplete transaction in commit order, if its END is known.
    blocker: Transaction | None
    #: The blocker's short tables on which events of later transactions were read (a stall's evidence).
    overtaken: list[str]
    #: Distinct events that apply now (ready transactions', and those without a transaction):
    #: with none, the batch only replaces the held records - no parse, no Spark job for the apply.
    ready_events: int = 0


def _transactions(rows: Iterable[Any], tx_topic: str, counts: Any) -> dict[str, Transaction]:
    transactions: dict[str, Transaction] = {}
    for row in rows:
        if row["txid"] is None:
            if row["untagged"] is not None and row["topic"] != tx_topic:
                raise _untagged(row["topic"], row["untagged"])
            continue  # a BEGIN, or a snapshot read: applies without a transaction
        found = transactions.setdefault(row["txid"], Transaction(row["txid"]))
        if row["topic"] != tx_topic:
            name = tail(row["topic"])
            found.seen[name] = found.seen.get(name, 0) + int(row["seen"])
        elif row["end_at"] is not None:
            found.end = (int(row["end_at"][0]), int(row["end_at"][1]))
            for dc in row["collections"] or ():
                if dc["data_collection"] is not None and counts(dc["data_collection"]):
                    name = tail(dc["data_collection"])
                    found.expected[name] = found.expected.get(name, 0) + int(dc["event_count"] or 0)
    return transactions


def plan(rows: Iterable[Any], tx_topic: str, counts: Any) -> Plan:
    """The aggregate's rows (``txid``, ``topic``, ``seen``, ``end_at``, ``collections``,
    ``untagged``) → :class:`Plan`. ``counts(data_collection)`` says whether the job reads a table.
    Raises ``ConfigError`` naming ``provide.transaction.metadata`` when a streamed change carries no
    ``transaction`` block."""
    rows = list(rows)
    transactions = _transactions(rows, tx_topic, counts)
    ordered = sorted((t for t in transactions.values() if t.end is not None), key=lambda t: t.end or (0, 0))
    ready: set[str] = set()
    blocker = None
    for transaction in ordered:  # commit order: the transaction topic's order (one partition)
        if not transaction.complete:
            blocker = transaction
            break
        ready.add(transaction.txid)
    held = set(transactions) - ready
    held_ends = {t for t in held if transactions[t].end is not None and sum(transactions[t].expected.values()) > 0}
    overtaken: list[str] = []
    if blocker is not None and blocker.end is not None:
        later = [t for t in ordered if t.end is not None and t.end > blocker.end]
        overtaken = [name for name in blocker.missing() if any(t.seen.get(name) for t in later)]
    loose = sum(int(r["seen"]) for r in rows if r["txid"] is None and r["topic"] != tx_topic)
    ready_events = loose + sum(sum(transactions[t].seen.values()) for t in ready)
    return Plan(held, held_ends, blocker, overtaken, ready_events)


def _untagged(topic: str, offset: int) -> ConfigError:
    return ConfigError(
        [
            ConfigProblem(
                "consistency",
                f"a change on {topic} (offset {offset}) has no transaction block, so its source transaction "
                "cannot be told",
                "set provide.transaction.metadata=true on the capturing connector (and replay from its start), "
                "or run the job with consistency=key",
            )
        ]
    )


@dataclass(frozen=True)
class Waiting:
    """What the target keeps (with the batch, in its transaction) about a blocker with a stall's
    evidence, so that the count survives the end of an available-now run."""

    txid: str
    seen: int
    batches: int
    since_batch: int
    since_ms: int
    #: What it lacks: ``<table> <seen> of <expected>, ...``.
    tables: str


def track(previous: Waiting | None, current: Plan, batch_id: int, now_ms: int) -> Waiting | None:
    """The waiting state after this batch: counts on while the same blocker, with evidence, gains
    no event; starts over when it gains one or another transaction blocks; none without evidence."""
    blocker = current.blocker
    if blocker is None or not current.overtaken:
        return None
    seen = sum(blocker.seen.values())
    tables = ", ".join(f"{t} {got} of {n}" for t, (got, n) in blocker.missing().items())
    if previous is not None and previous.txid == blocker.txid and previous.seen == seen:
        return Waiting(blocker.txid, seen, previous.batches + 1, previous.since_batch, previous.since_ms, tables)
    return Waiting(blocker.txid, seen, 1, batch_id, now_ms, tables)


def stalled(waiting: Waiting, tx_topic: str, now_ms: int) -> ConfigError:
    """The job's stop once ``waiting`` reached the bound: the transaction, what it lacks, how long
    it waited, and the fixes."""
    minutes = (now_ms - waiting.since_ms) / 60_000
    return ConfigError(
        [
            ConfigProblem(
                "transaction_stall_batches",
                f"source transaction {waiting.txid} on {tx_topic} cannot complete: its END is read but events are "
                f"missing (seen of expected per table: {waiting.tables}) while later transactions' events on "
                f"those tables arrived; it has held back every later transaction for {waiting.batches} batches "
                f"(since batch {waiting.since_batch}, {minutes:.1f} min) - the job started past its first events "
                "(starting_offsets=latest, a topic's retention, moved offsets)",
                "replay the topics from the transaction's start (starting_offsets=earliest with a new checkpoint, "
                "on topics that still hold it), or run the job with consistency=key; a larger "
                "transaction_stall_batches if its events are only late",
            )
        ]
    )
