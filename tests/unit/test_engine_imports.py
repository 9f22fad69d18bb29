"""The engine is a library of its own: it must not import Airflow or PySpark."""

import ast
import pathlib
import subprocess
import sys

ENGINE = pathlib.Path(__file__).resolve().parents[2] / "airflow_cdc" / "engine"
FORBIDDEN = ("airflow", "pyspark")


def test_no_engine_module_imports_airflow_or_pyspark():
    offenders = []
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.relative_to(ENGINE)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_every_engine_module_loads_neither_airflow_nor_pyspark():
    modules = sorted(
        ".".join(("airflow_cdc", "engine", *p.relative_to(ENGINE).with_suffix("").parts)).removesuffix(".__init__")
        for p in ENGINE.rglob("*.py")
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
