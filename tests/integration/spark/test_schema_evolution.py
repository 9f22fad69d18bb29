"""Schema changes end to end (issue 28): a PostgreSQL or MariaDB source whose table changes under
a running write load, captured with the changes' Connect schemas (JSON converter) by our engine or
by Debezium on Kafka Connect, and the Spark apply job into PostgreSQL and MariaDB targets that did
not exist before the run.

After every step - add a column (without and with a default), widen int -> bigint,
varchar(20) -> varchar(200), numeric(10,2) -> numeric(20,4), drop a column, rename one (then
execute-snapshot), create a new captured table, drop and recreate a table - the load pauses,
the job runs to the end of what was captured (on Connect: until the tables are equal), and the
target equals the source row by row over the source's columns. Under ``evolve`` a dropped
column gets NULL in the rows changed after the drop; under ``lenient`` it keeps its values.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.engine.testing import wait_until
from airflow_cdc.spark.apply import ApplyJob
from airflow_cdc.spark.reading import SourceOptions
from tests.integration.spark.evolution_support import (
    MARIA_TABLE,
    PG_TABLE,
    SIGNAL_DDL,
    ConnectCapture,
    EngineCapture,
    Load,
    Side,
    Source,
    apply_until_equal,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

#: (source, target, policy, backend): each source into each target, on each backend; evolve
#: where a dropped column matters.
CASES = [
    ("postgresql", "postgresql", "lenient", "engine"),
    ("postgresql", "mariadb", "evolve", "engine"),
    ("mariadb", "postgresql", "lenient", "engine"),
    ("mariadb", "mariadb", "evolve", "engine"),
    # Debezium on Kafka Connect: the same events (the oracle says so), the same outcomes.
    ("postgresql", "mariadb", "lenient", "connect"),
    ("mariadb", "postgresql", "evolve", "connect"),
    # consistency=transaction: the DDL before the batch's one target transaction.
    ("postgresql", "mariadb", "lenient", "engine-transactions"),
]


def transaction_mode(prefix: str) -> dict[str, str]:
    return {"consistency": "transaction", "transaction_topic": f"{prefix}.transaction"}


def steps(kind: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """(what, the DDL - run under the load - and what the test writes after it), in the source's dialect."""
    pg = kind == "postgresql"
    retype = (
        (lambda c, t: f"alter table evolving alter column {c} type {t}")
        if pg
        else (lambda c, t: f"alter table evolving modify column {c} {t}")
    )
    return [
        ("add a column", ("alter table evolving add column c1 int",), ("update evolving set c1 = id * 2",)),
        (
            "add a column with a default",
            (f"alter table evolving add column c2 {'text' if pg else 'varchar(10)'} not null default 'x'",),
            ("update evolving set c2 = 'y' where id % 4 = 0",),
        ),
        (
            "widen int to bigint",
            (retype("n", "bigint" if pg else "bigint not null"),),
            ("update evolving set n = n + 3000000000 where id % 5 = 0",),
        ),
        (
            "widen varchar(20) to varchar(200)",
            (retype("v", "varchar(200)"),),
            ("update evolving set v = repeat('w', 150) where id % 6 = 0",),
        ),
        (
            "widen numeric(10,2) to numeric(20,4)",
            # Row 12's last change in the batch is from before the ALTER: its Decimal has the old
            # scale, which the target (widened first) must decode it by.
            (
                "update evolving set amount = 15.25 where id = 12",
                retype("amount", "numeric(20,4)" if pg else "decimal(20,4)"),
            ),
            ("update evolving set amount = 1234567890.1234 where id % 7 = 0",),
        ),
        ("drop a column", ("alter table evolving drop column c1",), ()),
    ]


@pytest.mark.parametrize(
    ("evolving_source", "empty_target", "policy", "backend"), CASES, indirect=["evolving_source", "empty_target"]
)
def test_the_target_follows_every_schema_change_under_a_write_load(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    kafka_broker: Any,
    spark: Any,
    evolving_source: Source,
    empty_target: tuple[str, Side],
    policy: str,
    backend: str,
) -> None:
    source, target = evolving_source, empty_target
    url, target_side = target
    evolving, fresh = source.table("evolving"), source.table("fresh")
    if target_side.kind == "mariadb":  # into the target's database, whatever the source's schema
        database = target_side.table_names.pop("")
        target_side.table_names.update({evolving: f"{database}.evolving", fresh: f"{database}.fresh"})
    source.execute(
        SIGNAL_DDL,
        PG_TABLE if source.kind == "postgresql" else MARIA_TABLE,
        "insert into evolving (id, n, v, amount, old, at) select g, g, concat('v', g), g * 1.25, concat('old ', g), "
        + (
            "timestamptz '2026-01-01 00:00:00+00' + g * interval '1 minute' from generate_series(1, 300) g"
            if source.kind == "postgresql"
            else "timestamp '2026-01-01 00:00:00' + interval g minute from (select seq as g from seq_1_to_300) s"
        ),
    )
    prefix = f"ev{uuid.uuid4().hex[:8]}"
    capture: EngineCapture | ConnectCapture = (
        EngineCapture(source, prefix, tmp_path, kafka_broker, transactions=backend == "engine-transactions")
        if backend.startswith("engine")
        else ConnectCapture(source, prefix, request.getfixturevalue("connect_worker"), kafka_broker)
    )
    # Every table of the source but the signal table, including those created later.
    options = SourceOptions(
        kind="kafka",
        bootstrap_servers=kafka_broker.bootstrap_servers,
        topic_pattern=rf"{prefix}\.{source.schema}\.(?!debezium_signal$).*",
    )
    checkpoint = tmp_path / "checkpoint"
    source_side = source.side
    job = ApplyJob(
        source=options,
        target_url=url,
        checkpoint=str(checkpoint),
        table_map=dict(target_side.table_names),
        schema_change_policy=policy,
        **(transaction_mode(prefix) if capture.transactions else {}),
    )

    def apply_all(step: str, tables: tuple[str, ...] = (evolving,)) -> None:
        apply_until_equal(spark, job, capture, (source_side, target_side), step, tables)

    with capture, Load(source.connect) as load:
        wait_until(lambda: load.transactions > 20, 30, "writes")
        load.pause()
        apply_all("the initial snapshot")  # the target table is created from the schema
        for step, ddl, writes in steps(source.kind):
            load.resume()
            before = load.transactions
            source.execute(*ddl)  # under the running load
            wait_until(lambda: load.transactions > before + 10, 30, f"{step}: writes after the DDL")  # noqa: B023
            load.pause()
            if writes:
                source.execute(*writes)
            apply_all(step)
        # Dropped: c1 stays in the target; the rows changed after the drop have it NULL
        # under evolve, and keep it under lenient.
        load.resume()
        wait_until(lambda: load.transactions > before + 40, 30, "writes after the drop")
        load.pause()
        source.execute("update evolving set n = n + 1 where id % 5 = 0")
        apply_all("updates after the drop")
        c1 = target_side.rows(evolving, ["id", "c1"])
        touched = [c1[k][1] for k in range(5, 301, 5) if k in c1]  # c1 was id * 2 in each
        assert touched, "no row of the initial ones was changed after the drop"
        if policy == "evolve":
            assert all(v is None for v in touched), touched[:5]
        else:
            assert all(v is not None for v in touched), touched[:5]
        # A rename is a drop and an add: the rows unchanged since have the new column NULL
        # until an incremental snapshot reads them again.
        load.resume()
        source.execute("alter table evolving rename column old to renamed")
        load.pause()
        capture.snapshot(evolving)
        apply_all("rename a column, then execute-snapshot")
        # A table created on the source flows into a new target table with no manual step.
        load.resume()
        source.execute(
            "create table fresh (id int primary key, t text, d date)",
            "insert into fresh values (1, 'f1', date '2026-01-02'), (2, 'f2', date '2026-01-03')",
        )
        load.pause()
        apply_all("a new table", (evolving, fresh))
        # A table dropped and recreated (another shape, other rows): neither log says DROP to
        # the target, so the README's recipe - TRUNCATE first, whose record empties the target
        # table - then the new table's rows and columns, as for any table.
        load.resume()
        source.execute(
            "truncate table fresh",
            "drop table fresh",
            "create table fresh (id int primary key, t text, e int)",
            "insert into fresh values (3, 'f3', 30), (4, 'f4', 40)",
        )
        load.pause()
        apply_all("a table dropped and recreated", (evolving, fresh))
