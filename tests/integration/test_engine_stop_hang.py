"""A stop that hangs says where: ``engine stop`` of an instance that does not end on SIGTERM
asks it for its threads' stacks (SIGUSR1, faulthandler) before it kills it, and the error shows
them. The instance here is a real process holding the state directory's lock, stuck in a
function whose name the error must show."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_cdc.engine.errors import CdcError
from airflow_cdc.engine.server import control
from airflow_cdc.engine.server.instance_files import LOG, is_running, read_status
from airflow_cdc.engine.testing import wait_until

pytestmark = pytest.mark.integration

HUNG = """
import faulthandler, json, os, signal, sys, time
from pathlib import Path
from airflow_cdc.engine.server import instance_files

directory = Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: None)  # a stop that never ends
faulthandler.register(signal.SIGUSR1, all_threads=True)  # as EngineInstance registers it

def waiting_for_a_source_that_never_answers():
    while True:
        time.sleep(0.05)

with instance_files._locked(directory, blocking=True):
    # Written whole, then renamed into place, as EngineInstance writes it: a reader never sees it half-written.
    (directory / "status.tmp").write_text(json.dumps({"pid": os.getpid(), "state": "POLLING_TASKS"}))
    os.replace(directory / "status.tmp", directory / instance_files.STATUS)
    waiting_for_a_source_that_never_answers()
"""


def test_a_stop_that_hangs_is_killed_and_the_error_shows_where_it_hung(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with open(state / LOG, "ab") as log:
        process = subprocess.Popen([sys.executable, "-c", HUNG, str(state)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: read_status(state) and is_running(state), 30, "the hung instance holds its lock")
        assert read_status(state) == {"pid": process.pid, "state": "POLLING_TASKS"}

        with pytest.raises(CdcError) as stopped:
            control.stop({"name": "hung", "state.dir": str(state)}, timeout=1)

        message = str(stopped.value)
        assert message.startswith("instance 'hung' did not stop within 1s and was killed; where its threads were")
        assert "waiting_for_a_source_that_never_answers" in message, message
        assert process.wait(10) == -9
        assert not is_running(state)
    finally:
        if process.poll() is None:
            os.kill(process.pid, 9)
            process.wait()
