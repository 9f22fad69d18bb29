"""A bounded capture: run an instance's engine in this process until a bound is reached, commit
and stop - micro-batch CDC on a schedule without a long-running instance.

``CdcCaptureOperator`` reaches it through its backend's ``run_until`` (``airflow_cdc.backends``):
the run uses only the engine's public pieces - the instance's validated configuration, its sink
and offset store, the state directory's lock (held all along, so a detached start of the same
instance is refused meanwhile, and a running instance refuses the capture) and the connector's
position codec.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.engine.engine import Engine
from airflow_cdc.engine.errors import EngineFailedError, RefusedError
from airflow_cdc.engine.positions import PositionCodec, codec_for
from airflow_cdc.engine.processing import RecordCommitter
from airflow_cdc.engine.records import SerializedRecord
from airflow_cdc.engine.serialization import JsonSerializer
from airflow_cdc.engine.server.instance_files import offsets_lock, resolve, state_dir, validated
from airflow_cdc.engine.server.status import instance_position
from airflow_cdc.engine.sinks import Sink, build_sink
from airflow_cdc.engine.storage import build_offset_store
from airflow_cdc.engine.validation import ValidatedConfig


@dataclass(frozen=True)
class CaptureBounds:
    """When a capture stops: whichever comes first. At least one must be given."""

    #: Records committed (the run stops at the first check past it: a batch more at most).
    max_records: int | None = None
    #: Seconds since the engine was started (connecting and any snapshot included).
    max_duration: float | None = None
    #: A position as the source writes them (an LSN ``0/16B3748``, a GTID set ``0-1-42``, a binlog
    #: ``file:pos``): stop once it is committed.
    target_position: str | None = None

    def problems(self) -> list[str]:
        out = []
        if self.max_records is None and self.max_duration is None and not self.target_position:
            out.append("give max_records, max_duration or target_position: a capture without a bound never ends")
        if self.max_records is not None and self.max_records < 1:
            out.append(f"max_records must be at least 1, not {self.max_records}")
        if self.max_duration is not None and self.max_duration <= 0:
            out.append(f"max_duration must be positive seconds, not {self.max_duration}")
        return out


@dataclass(frozen=True)
class CaptureResult:
    name: str
    run_id: str
    #: ``max_records``, ``max_duration``, ``target_position`` or ``finished`` (nothing more to read).
    stopped_by: str
    #: Records committed by this run.
    records: int
    #: Rows (change events with a value) handed to the sink, by topic.
    topic_rows: Mapping[str, int]
    #: Every partition's committed offset after the run: ``{"partition", "offset", "position"}``.
    offsets: list[dict[str, Any]] = field(default_factory=list)
    duration_s: float = 0.0


class CountingSink(Sink):
    """The instance's sink, counting the change events each topic gets."""

    type = "counting"

    def __init__(self, inner: Sink) -> None:
        super().__init__()
        self.inner = inner
        self.topic_rows: Counter[str] = Counter()

    def start(self) -> None:
        self.inner.start()

    def handle_batch(self, records: list[SerializedRecord], committer: RecordCommitter) -> None:
        counted = Counter(record.topic for record in records if record.value is not None)
        with self._counters_lock:
            self.topic_rows.update(counted)
        self.inner.handle_batch(records, committer)

    def flush(self, timeout: float) -> None:
        self.inner.flush(timeout)

    def close(self, timeout: float = 10.0) -> None:
        self.inner.close(timeout)

    def metrics(self) -> dict[str, float]:
        return self.inner.metrics()

    def topic_ends(self) -> dict[str, int]:
        return self.inner.topic_ends()


def run_until(props: Mapping[str, Any], bounds: CaptureBounds, *, check_interval: float = 0.1) -> CaptureResult:
    """Run the engine of ``props`` (an instance's configuration) until ``bounds``; commit, stop.

    RefusedError while the instance runs elsewhere on this machine; ConfigError for an invalid
    configuration; OffsetError for a target that is not a position of this source;
    EngineFailedError when the engine fails (what it delivered is committed all the same)."""
    problems = bounds.problems()
    if problems:
        raise ValueError("; ".join(problems))
    settings = resolve(props)
    directory = state_dir(settings)
    try:
        with offsets_lock(directory):
            return _capture_locked(validated(settings), bounds, check_interval)
    except BlockingIOError:
        raise RefusedError(
            f"instance {settings.get('name')!r} is running ({directory}): a bounded capture runs the engine "
            "inside the task; stop the instance first, or follow it with the sensors instead"
        ) from None


def _capture_locked(config: ValidatedConfig, bounds: CaptureBounds, check_interval: float) -> CaptureResult:
    codec = codec_for(config.config)
    if bounds.target_position:
        codec.parse(bounds.target_position)  # OffsetError now, naming the form positions take
    sink = CountingSink(build_sink(config.config))
    engine = Engine(config, batch_handler=sink, serializer=JsonSerializer.from_config(config.config))
    started = time.monotonic()
    sink.start()
    thread = threading.Thread(target=_run, args=(engine,), name=f"capture-{engine.name}", daemon=True)
    thread.start()
    try:
        stopped_by = _wait_for_bound(engine, codec, bounds, started, thread, check_interval)
    finally:
        timeout = engine.settings["task.management.timeout.ms"] / 1000
        engine.close(timeout)
        thread.join(timeout)
        sink.close()
    if engine.error is not None:
        raise EngineFailedError(f"engine {engine.name!r} stopped after an error: {engine.error}") from engine.error
    return CaptureResult(
        name=engine.name,
        run_id=engine.notifications.run_id,
        stopped_by=stopped_by,
        records=sum(int(task["committed_records"]) for task in engine.status()["tasks"]),
        topic_rows=dict(sink.topic_rows),
        offsets=_committed(config, codec),
        duration_s=round(time.monotonic() - started, 3),
    )


def _run(engine: Engine) -> None:
    with contextlib.suppress(Exception):  # kept in engine.error, raised by capture()
        engine.run()


def _wait_for_bound(
    engine: Engine,
    codec: PositionCodec,
    bounds: CaptureBounds,
    started: float,
    thread: threading.Thread,
    check_interval: float,
) -> str:
    pause = threading.Event()
    while thread.is_alive() and engine.error is None:
        tasks = engine.status()["tasks"]
        if bounds.max_records is not None and sum(int(t["committed_records"]) for t in tasks) >= bounds.max_records:
            return "max_records"
        if bounds.max_duration is not None and time.monotonic() - started >= bounds.max_duration:
            return "max_duration"
        position = instance_position(engine, codec, bounds.target_position)
        if bounds.target_position and position.reached:
            return "target_position"
        if position.phase == "finished":
            return "finished"
        pause.wait(check_interval)
    return "failed" if engine.error is not None else "finished"


def _committed(config: ValidatedConfig, codec: PositionCodec) -> list[dict[str, Any]]:
    """The offsets as committed, read back from a fresh store (the engine's is stopped)."""
    store = build_offset_store(config.name, config.engine)
    store.start()
    try:
        return [
            {"partition": dict(partition), "offset": dict(offset), "position": codec.format(offset)}
            for partition, offset in store.entries()
        ]
    finally:
        store.stop()


#: The name it had in ``airflow_cdc.operators.bounded``.
capture = run_until
