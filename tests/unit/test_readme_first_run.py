"""The README's first-run recipe and the files the system test runs stay the same text."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.readme_blocks import readme_block

DAGS = Path(__file__).resolve().parents[2] / "dags"


def test_the_readme_dag_is_the_file_in_dags() -> None:
    assert readme_block("first-run:dag") == (DAGS / "cdc_quickstart.py").read_text()


def test_the_readme_connections_are_of_the_types_the_operators_take() -> None:
    types = {}
    for line in readme_block("first-run:shell").splitlines():
        if line.startswith("airflow connections add "):
            words = shlex.split(line)
            types[words[3]] = words[words.index("--conn-type") + 1]
    assert types == {
        "cdc_shop": "cdc_engine",
        "pg_shop": "postgres",
        "pg_shop_replica": "postgres",
        "spark_cdc": "spark",
    }
