"""Unit tests of the Airflow layer. Airflow reads AIRFLOW_HOME when it is first imported: a
throwaway one unless the caller chose one."""

import os
import tempfile

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-cdc-tests-"))
