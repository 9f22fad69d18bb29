"""The README's demo command works and its own check passes."""

import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def test_demo_command_runs_and_checks_itself():
    done = subprocess.run(
        [str(BIN / "airflow-cdc"), "demo", "--events", "600", "--show", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "check passed: all 1200 events delivered" in done.stdout
    assert done.stdout.count('"op":"c"') == 2
