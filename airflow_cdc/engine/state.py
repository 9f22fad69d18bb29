"""The engine's lifecycle: one enum, one allowed-transitions table, one guarded transition.

The order of states lives in :data:`ALLOWED_TRANSITIONS`, never in enum values, so that adding a
state cannot silently change which moves are legal.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Iterable

from airflow_cdc.engine.errors import IllegalStateError

log = logging.getLogger(__name__)


class EngineState(enum.Enum):
    CREATING = "CREATING"
    INITIALIZING = "INITIALIZING"
    CREATING_TASKS = "CREATING_TASKS"
    STARTING_TASKS = "STARTING_TASKS"
    POLLING_TASKS = "POLLING_TASKS"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"


S = EngineState

#: Every legal move. Each of the first five states may go to STOPPING (a close() or an error);
#: STOPPED is final: a stopped engine is never restarted, a new one is built.
ALLOWED_TRANSITIONS: dict[EngineState, frozenset[EngineState]] = {
    S.CREATING: frozenset({S.INITIALIZING, S.STOPPING}),
    S.INITIALIZING: frozenset({S.CREATING_TASKS, S.STOPPING}),
    S.CREATING_TASKS: frozenset({S.STARTING_TASKS, S.STOPPING}),
    S.STARTING_TASKS: frozenset({S.POLLING_TASKS, S.STOPPING}),
    S.POLLING_TASKS: frozenset({S.STOPPING}),
    S.STOPPING: frozenset({S.STOPPED}),
    S.STOPPED: frozenset(),
}


class StateMachine:
    """Holds the current state; changes it only through :meth:`transition`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._state = EngineState.CREATING
        self._changed = threading.Condition()

    @property
    def state(self) -> EngineState:
        return self._state

    def transition(self, expected: EngineState, requested: EngineState) -> None:
        """Move from ``expected`` to ``requested``, or raise without changing anything."""
        with self._changed:
            actual = self._state
            if actual is not expected:
                raise IllegalStateError(
                    f"engine {self._name!r}: cannot move {expected.value} -> {requested.value}, "
                    f"the engine is in {actual.value}",
                    expected=expected.value,
                    actual=actual.value,
                    requested=requested.value,
                )
            if requested not in ALLOWED_TRANSITIONS[expected]:
                raise IllegalStateError(
                    f"engine {self._name!r}: {expected.value} -> {requested.value} is not an "
                    f"allowed transition (allowed from {expected.value}: "
                    f"{sorted(s.value for s in ALLOWED_TRANSITIONS[expected]) or 'none, it is final'})",
                    expected=expected.value,
                    actual=actual.value,
                    requested=requested.value,
                )
            self._state = requested
            log.info("engine %r: %s -> %s", self._name, expected.value, requested.value)
            self._changed.notify_all()

    def transition_to_stopping(self) -> EngineState | None:
        """Move to STOPPING from whatever running state the engine is in.

        Returns the state it left, or None when the engine is already STOPPING or STOPPED.
        """
        with self._changed:
            current = self._state
            if current in (EngineState.STOPPING, EngineState.STOPPED):
                return None
            self.transition(current, EngineState.STOPPING)
            return current

    def wait_for(self, states: Iterable[EngineState], timeout: float | None) -> bool:
        """Block until the state is one of ``states``; False if ``timeout`` ran out first."""
        wanted = frozenset(states)
        with self._changed:
            return self._changed.wait_for(lambda: self._state in wanted, timeout)
