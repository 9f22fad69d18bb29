"""The README's demo command works on a throwaway PostgreSQL and its own check passes."""

import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def test_demo_command_runs_the_pipeline_and_checks_itself():
    done = subprocess.run(
        [str(BIN / "airflow-cdc"), "demo", "--writes", "200", "--show", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "snapshot: 1200 rows read" in done.stdout
    assert "check passed: target equals source, row by row" in done.stdout
    assert done.stdout.count(" op=r ") == 2
