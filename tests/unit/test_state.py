import logging
from collections import deque

import pytest

from airflow_cdc.engine import ALLOWED_TRANSITIONS, EngineState, IllegalStateError
from airflow_cdc.engine.state import StateMachine

S = EngineState
RUNNING = [S.CREATING, S.INITIALIZING, S.CREATING_TASKS, S.STARTING_TASKS, S.POLLING_TASKS]
# Written out from seed 000, independently of the table under test.
LEGAL = {
    (S.CREATING, S.INITIALIZING),
    (S.INITIALIZING, S.CREATING_TASKS),
    (S.CREATING_TASKS, S.STARTING_TASKS),
    (S.STARTING_TASKS, S.POLLING_TASKS),
    (S.STOPPING, S.STOPPED),
} | {(state, S.STOPPING) for state in RUNNING}


def reach(state: EngineState) -> StateMachine:
    """A machine brought to ``state`` through legal transitions only."""
    paths = {S.CREATING: []}
    queue = deque([S.CREATING])
    while queue:
        current = queue.popleft()
        for nxt in ALLOWED_TRANSITIONS[current]:
            if nxt not in paths:
                paths[nxt] = [*paths[current], (current, nxt)]
                queue.append(nxt)
    machine = StateMachine("t")
    for src, dst in paths[state]:
        machine.transition(src, dst)
    return machine


@pytest.mark.parametrize("src", list(S), ids=lambda s: s.value)
@pytest.mark.parametrize("dst", list(S), ids=lambda s: s.value)
def test_every_transition_is_allowed_exactly_when_the_seed_says(src, dst):
    machine = reach(src)
    if (src, dst) in LEGAL:
        machine.transition(src, dst)
        assert machine.state is dst
    else:
        with pytest.raises(IllegalStateError):
            machine.transition(src, dst)
        assert machine.state is src


def test_transition_from_a_state_the_engine_is_not_in_fails_and_changes_nothing():
    machine = reach(S.INITIALIZING)
    with pytest.raises(IllegalStateError, match="is in INITIALIZING"):
        machine.transition(S.CREATING, S.INITIALIZING)
    assert machine.state is S.INITIALIZING


def test_stopped_is_final():
    assert ALLOWED_TRANSITIONS[S.STOPPED] == frozenset()


def test_every_change_is_logged(caplog):
    caplog.set_level(logging.INFO, logger="airflow_cdc.engine.state")
    machine = StateMachine("logged")
    machine.transition(S.CREATING, S.STOPPING)
    machine.transition(S.STOPPING, S.STOPPED)
    assert [r.getMessage() for r in caplog.records] == [
        "engine 'logged': CREATING -> STOPPING",
        "engine 'logged': STOPPING -> STOPPED",
    ]
