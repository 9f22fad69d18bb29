"""A throwaway AIRFLOW_HOME for a test process, unless the caller chose one. Airflow reads it
when it is first imported; the directory is removed when the process ends."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile


def throwaway_airflow_home(prefix: str) -> None:
    if "AIRFLOW_HOME" in os.environ:
        return
    home = tempfile.mkdtemp(prefix=prefix)
    os.environ["AIRFLOW_HOME"] = home
    atexit.register(shutil.rmtree, home, ignore_errors=True)
