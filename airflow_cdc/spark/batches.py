"""One micro-batch of the apply job (``foreachBatch``): parse, last change per key, lanes, target,
and what the run did - counts and the seconds of each phase of its batches.

The phases are measured apart so the next bottleneck is visible (issue 27): ``read`` is the
source (the batch facts' job reads it into Spark's cache), ``transform`` the JSON parse, the
last change per key and the lanes, ``write`` the target. A SQL target computes and writes
the latest frame in one Spark job and times its halves itself (``SqlTarget.phases``); for a lake
target a count runs the transform first.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_cdc.spark.apply import ApplyJob

PHASES = ("read", "transform", "write")


@dataclass
class Totals:
    """What the run did, summed over its micro-batches."""

    batches: int = 0
    records: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    #: Seconds per phase of the batches: ``read`` (the source and the JSON parse), ``transform``
    #: (the last change per key, the lanes), ``write`` (the target) - where the next bottleneck is.
    phases: dict[str, float] = field(default_factory=dict)

    def add(self, counts: dict[str, int]) -> None:
        for name, value in counts.items():
            self.counts[name] = self.counts.get(name, 0) + int(value)

    def timed(self, phase: str, started: float) -> float:
        """Adds the seconds since ``started`` to ``phase``; returns them."""
        seconds = time.perf_counter() - started
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds
        return seconds


def batch_writer(job: ApplyJob, totals: Totals) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function: transforms, lanes, target; totals counted on the driver."""
    from airflow_cdc.spark.preflight import check_job_target
    from airflow_cdc.spark.schema_batches import SchemaBook, stripped
    from airflow_cdc.spark.schema_policy import creates
    from airflow_cdc.spark.targets import target_for
    from airflow_cdc.spark.targets.sql_target import SqlTarget
    from airflow_cdc.spark.transforms import laned_latest, parse, raw_facts, row_changes

    if job.consistency == "transaction":
        from airflow_cdc.spark.transactions import consistent_writer

        return consistent_writer(job, totals)
    target = target_for(job.target_url, job.table_map, job.target_settings)
    check_job_target(
        job.target_url, job.source.topics, job.table_map, job.lane_groups, creates=creates(job.schema_change_policy)
    )
    # What the runs learned of the tables' schemas, beside the checkpoint (``schema_batches.py``).
    book = SchemaBook(job.checkpoint.rstrip("/") + "/cdc_schemas")
    prepare = getattr(target, "prepare", None)

    def write(batch: Any, batch_id: int) -> None:
        # The raw batch is cached, not the parsed one: the source is read once, and parsing
        # twice (the general plan's branches) costs less than caching maps and structs. Its
        # records' Connect schemas are cut off as it is read: a hash stays (``stripped``).
        started = time.perf_counter()
        raw = stripped(batch.select("partition", "offset", "key", "value"), book.known(batch.sparkSession)).persist()
        parsed = None
        try:
            facts = raw_facts(raw)  # reads the source into the cache: the read phase
            records = facts.records
            took = [totals.timed("read", started)]
            if records and facts.schemas and prepare is not None:
                prepare(book.of_batch(raw, facts.schemas))  # tables created, columns added, before the write
            if records:
                started = time.perf_counter()
                parsed = parse(raw)
                if facts.truncates or facts.toasted:
                    parsed = parsed.persist()  # the general plan reads it several times
                laned = laned_latest(row_changes(parsed), job.lanes, job.lane_groups, facts)
                if isinstance(target, SqlTarget):
                    # One Spark job computes and writes the latest frame; the target times its
                    # two halves (a count first would run the plan's shuffle a second time).
                    totals.add(target.apply(laned))
                    rows = target.rows
                    for phase in ("transform", "write"):
                        took.append(target.phases[phase])
                        totals.phases[phase] = totals.phases.get(phase, 0.0) + target.phases[phase]
                else:
                    rows = laned.count()  # the lake targets' own jobs read it again
                    took.append(totals.timed("transform", started))
                    started = time.perf_counter()
                    totals.add(target.apply(laned))
                    took.append(totals.timed("write", started))
            totals.batches += 1
            totals.records += records
            phases = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in zip(PHASES, took, strict=False))
            rows_text = f", {rows} rows" if records else ""
            print(f"applied batch {batch_id}: {records} records{rows_text} ({phases})", file=sys.stderr, flush=True)
        finally:
            if parsed is not None:
                parsed.unpersist()
            raw.unpersist()

    return write
