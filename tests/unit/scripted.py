"""A scripted source connector for engine tests: tasks serve given batches and let a test hook
into start/poll/stop. It exercises the real engine through its public connector contract."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from airflow_cdc.engine import Config, SourceConnector, SourceRecord, SourceTask, TaskContext
from airflow_cdc.engine.envelope import Op, change_envelope, source_info


def record(task: int, seq: int, *, table: str = "public.t") -> SourceRecord:
    partition = {"server": "test", "task": task}
    value = change_envelope(
        Op.CREATE,
        before=None,
        after={"id": seq, "task": task},
        source=source_info(connector="test", name="test", ts_ns=0, db="db", table=table),
        ts_ns=0,
    )
    return SourceRecord(f"test.{table}", {"id": seq}, value, partition, {"seq": seq})


class ScriptedConnector(SourceConnector):
    """``tasks`` tasks; task *i* serves ``total`` records in batches of ``batch`` (then idles)."""

    def __init__(
        self,
        *,
        tasks: int = 1,
        total: int = 100,
        batch: int = 10,
        on_start: Callable[[int], None] | None = None,
        on_poll: Callable[[int, int], None] | None = None,
    ) -> None:
        self.tasks, self.total, self.batch = tasks, total, batch
        self.on_start, self.on_poll = on_start, on_poll
        self.events: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.commits: dict[int, list[Any]] = {}
        self.polls = 0

    def log(self, what: str, task: int) -> None:
        with self.lock:
            self.events.append((what, task))

    def task_class(self) -> type[SourceTask]:
        connector = self

        class ScriptedTask(SourceTask):
            def start(self, context: TaskContext) -> None:
                self.index = int(context.config["scripted.task"])
                connector.log("start-begin", self.index)
                committed = context.offset({"server": "test", "task": self.index})
                self.next = 0 if committed is None else int(committed["seq"]) + 1  # type: ignore[arg-type]
                if connector.on_start:
                    connector.on_start(self.index)
                connector.log("start-end", self.index)

            def poll(self) -> list[SourceRecord]:
                with connector.lock:
                    connector.polls += 1
                if connector.on_poll:
                    connector.on_poll(self.index, self.next)
                end = min(connector.total, self.next + connector.batch)
                if self.next >= end:
                    threading.Event().wait(0.005)
                    return []
                out = [record(self.index, seq) for seq in range(self.next, end)]
                self.next = end
                return out

            def commit(self, offsets: Any) -> None:
                with connector.lock:
                    connector.commits.setdefault(self.index, []).append(dict(offsets))

            def stop(self) -> None:
                connector.log("stop", self.index)

        return ScriptedTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        return [self.config.with_(**{"scripted.task": i}) for i in range(min(max_tasks, self.tasks))]


def config(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "test-engine",
        "offset.storage": "memory",
        "offset.commit.policy": "always",
        "errors.retry.delay.initial.ms": 1,
        "errors.retry.delay.max.ms": 5,
        "task.management.timeout.ms": 10_000,
    }
    base.update({k.replace("_", "."): v for k, v in overrides.items()})
    return base
