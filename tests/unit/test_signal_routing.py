"""The engine's signal router (``InProcessChannel``): each task gets the signals that concern it."""

from __future__ import annotations

from airflow_cdc.engine.signals.channels import InProcessChannel, SignalChannel
from airflow_cdc.engine.signals.signal import Signal, SignalError, parse_signal


def names(tables: set[str]):  # type: ignore[no-untyped-def]
    """A task's predicate: it captures ``tables``."""
    return lambda signal: bool(set(signal.data_collections) & tables)


def ids(items: list[Signal | SignalError]) -> list[str]:
    return [item.id if isinstance(item, Signal) else f"error:{item}" for item in items]


class Lines(SignalChannel):
    name = "file"

    def __init__(self) -> None:
        self.pending: list[Signal | SignalError] = []
        self.closed = False

    def read(self) -> list[Signal | SignalError]:
        taken, self.pending = self.pending, []
        return taken

    def close(self) -> None:
        self.closed = True


def test_each_signal_goes_to_the_tasks_it_concerns_and_one_that_concerns_none_to_the_first() -> None:
    hub = InProcessChannel()
    first, second = hub.subscribe(names({"public.a", "public.both"})), hub.subscribe(names({"public.b", "public.both"}))
    hub.send("execute-snapshot", {"data-collections": ["public.b"]}, "b")
    hub.send("execute-snapshot", {"data-collections": ["public.both"]}, "both")
    hub.send("execute-snapshot", {"data-collections": ["public.none"]}, "none")
    assert ids(first.read()) == ["both", "none"]  # the first read routes everything
    assert ids(second.read()) == ["b", "both"]
    assert first.read() == [] and second.read() == []


def test_signals_sent_before_any_task_subscribed_wait_for_one() -> None:
    hub = InProcessChannel()
    hub.send("log", {"message": "early"}, "early")
    task = hub.subscribe(lambda signal: False)
    assert ids(task.read()) == ["early"]


def test_a_shared_channel_is_opened_once_and_closed_with_its_last_task() -> None:
    hub = InProcessChannel()
    opened: list[Lines] = []

    def open_lines() -> Lines:
        opened.append(Lines())
        return opened[-1]

    first = hub.subscribe(names({"public.a"}), {"file:x": open_lines})
    second = hub.subscribe(names({"public.b"}), {"file:x": open_lines})
    assert len(opened) == 1
    opened[0].pending = [
        parse_signal("b", "execute-snapshot", {"data-collections": ["public.b"]}, "file"),
        SignalError("line 2: not valid JSON"),
    ]
    assert ids(first.read()) == ["error:line 2: not valid JSON"]  # reported once, by the first
    assert ids(second.read()) == ["b"]
    first.close()
    assert not opened[0].closed
    second.close()
    assert opened[0].closed


def test_a_signal_a_task_read_itself_is_shared_with_the_tasks_it_concerns() -> None:
    hub = InProcessChannel()
    first, second = hub.subscribe(names({"public.a"})), hub.subscribe(names({"public.b", "public.a"}))
    mine = parse_signal("s", "execute-snapshot", {"data-collections": ["public.a"]}, "source")
    assert first.share(mine) is True and ids(second.read()) == ["s"]
    theirs = parse_signal("t", "execute-snapshot", {"data-collections": ["public.b"]}, "source")
    assert first.share(theirs) is False and ids(second.read()) == ["t"]
    nobodys = parse_signal("n", "execute-snapshot", {"data-collections": ["public.n"]}, "source")
    assert second.share(nobodys) is True and first.read() == []  # its reader rejects it
