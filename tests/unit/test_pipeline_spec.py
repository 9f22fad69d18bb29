"""A pipeline file's validation (airflow_cdc.pipeline.spec): every problem named by its line and
key, in one pass, and ``airflow-cdc pipeline check`` saying the same from a terminal."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from airflow_cdc.cli import EXIT_CONFIG, main
from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.engine.signals.signal import SNAPSHOT_TYPES
from airflow_cdc.pipeline.spec import (
    ApplySpec,
    PipelineSpecError,
    SnapshotSpec,
    group_id,
    load_pipeline_file,
    parse_pipeline,
)
from airflow_cdc.spark.schema_policy import POLICIES

EXAMPLE = Path(__file__).resolve().parents[2] / "dags" / "pipelines" / "shop.yaml"

VALID = """\
dag_id: shop
source:
  conn_id: pg_shop
backend:
  conn_id: cdc_shop
  topic_prefix: shop
tables:
  - public.orders
  - name: public.customers
    target: crm.customers
apply:
  target_conn_id: pg_replica
"""


def problems(text: str) -> list[tuple[int, str, str]]:
    """``(line, key, message)`` of every problem of ``text``."""
    with pytest.raises(PipelineSpecError) as caught:
        parse_pipeline(textwrap.dedent(text), "p.yaml")
    return [(p.line, p.key, p.message) for p in caught.value.problems]


def test_a_valid_file_gives_its_tables_with_defaults() -> None:
    spec = parse_pipeline(VALID)
    assert [t.name for t in spec.tables or ()] == ["public.orders", "public.customers"]
    assert spec.tables and spec.tables[1].target == "crm.customers"
    assert spec.snapshot.policy == "initial" and spec.apply.schema_change_policy == "lenient"
    assert spec.backend.start is True


def test_the_example_file_is_valid() -> None:
    spec = load_pipeline_file(EXAMPLE)
    assert spec.dag_id == "example_cdc_declared"
    assert spec.apply.spark_conn_id == "spark_cdc"


def test_every_problem_is_named_by_line_and_key_in_one_pass() -> None:
    found = problems(
        """\
        dag_id: shop
        source:
          conn_id: pg_shop
        backend:
          conn_id: cdc_shop
        tables:
          - public.orders
          - name: public.customers
            filtr: "id > 5"
        snapshot:
          policy: sometimes
        apply:
          target_conn_id: pg_replica
          lanes: 0
        """
    )
    assert [(line, key) for line, key, _ in found] == [
        (4, "backend.topic_prefix"),  # missing: the line of the mapping that lacks it
        (9, "tables.1.filtr"),  # unknown: the line of the key itself
        (11, "snapshot.policy"),
        (14, "apply.lanes"),
    ]
    messages = dict(((line, key), message) for line, key, message in found)
    assert messages[(4, "backend.topic_prefix")] == "required key missing"
    assert messages[(9, "tables.1.filtr")] == "unknown key"
    assert "'initial', 'backfill' or 'none'" in messages[(11, "snapshot.policy")]


def test_a_misspelt_key_gets_the_key_meant() -> None:
    with pytest.raises(PipelineSpecError) as caught:
        parse_pipeline(VALID.replace("  topic_prefix: shop", "  topic_prefx: shop"), "p.yaml")
    [problem] = [p for p in caught.value.problems if p.key == "backend.topic_prefx"]
    assert (problem.line, problem.fix) == (6, "did you mean 'topic_prefix'?")
    assert str(problem).startswith("p.yaml:6: backend.topic_prefx: unknown key")


def test_a_bad_pattern_and_a_bad_table_name_are_named() -> None:
    found = problems(
        """\
        dag_id: shop
        source: {conn_id: pg_shop}
        backend: {conn_id: cdc_shop, topic_prefix: shop}
        table_pattern:
          pattern: 'public\\.(orders'
        apply: {target_conn_id: pg_replica}
        """
    )
    [(line, key, message)] = found
    assert (line, key) == (5, "table_pattern.pattern") and "missing )" in message
    found = problems(VALID.replace("  - public.orders", "  - orders; drop table x"))
    assert [(line, key) for line, key, _ in found] == [(8, "tables.0")]  # as written: a bare name


@pytest.mark.parametrize(
    ("change", "line", "key", "says"),
    [
        (
            ("tables:\n  - public.orders\n  - name: public.customers\n    target: crm.customers\n", ""),
            1,
            "tables",
            "exactly one of tables",
        ),
        (
            ("  target_conn_id: pg_replica\n", "  target_conn_id: pg_replica\n  target_url: delta:/x\n"),
            11,
            "apply",
            "exactly one of",
        ),
        (
            ("apply:", "snapshot:\n  policy: backfill\napply:"),
            11,
            "snapshot.additional_conditions",
            "re-reads whole tables",
        ),
    ],
)
def test_problems_across_keys_are_named_by_line_and_key(
    change: tuple[str, str], line: int, key: str, says: str
) -> None:
    found = problems(VALID.replace(*change))
    assert any(at == line and k == key and says in m for at, k, m in found), found


def test_two_tables_whose_groups_would_collide_are_refused() -> None:
    found = problems(VALID.replace("  - public.orders\n", "  - public.orders_x\n  - public_orders.x\n"))
    assert found == [(9, "tables.1.name", "same task group 'public_orders_x' as 'public.orders_x'")]


def test_yaml_syntax_and_shape_errors_name_the_line() -> None:
    [(line, key, _)] = problems("dag_id: shop\nsource:\n  conn_id: [pg\n")
    assert key == "(yaml)" and line >= 3
    assert problems("- a list\n") == [(1, "(document)", "not a mapping of keys")]


def test_the_problems_are_the_projects_config_error() -> None:
    with pytest.raises(ConfigError):
        parse_pipeline("dag_id: shop\n")


def test_the_models_choices_are_the_engines() -> None:
    assert set(SnapshotSpec.model_fields["type"].annotation.__args__) == set(SNAPSHOT_TYPES)  # type: ignore[union-attr]
    assert set(ApplySpec.model_fields["schema_change_policy"].annotation.__args__) == set(POLICIES)  # type: ignore[union-attr]


def test_group_ids_are_what_airflow_accepts() -> None:
    assert group_id("public.orders") == "public_orders"
    assert group_id("shop.order$items") == "shop_order_items"


def test_pipeline_check_runs_the_same_validation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", "check", str(EXAMPLE)]) == 0
    assert "pipeline OK: example_cdc_declared, 2 table(s): public.orders, public.customers" in capsys.readouterr().out

    bad = tmp_path / "bad.yaml"
    bad.write_text(VALID.replace("  topic_prefix: shop", "  topic_prefx: shop"))
    assert main(["pipeline", "check", str(bad)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"{bad}:6: backend.topic_prefx: unknown key (fix: did you mean 'topic_prefix'?)" in err
    assert main(["pipeline", "check", str(tmp_path / "missing.yaml")]) == EXIT_CONFIG
    assert "missing.yaml:1: (file)" in capsys.readouterr().err


def test_the_readme_example_is_valid() -> None:
    from tests.readme_blocks import readme_block

    spec = parse_pipeline(readme_block("declared:yaml"), "README.md")
    assert [t.name for t in spec.tables or ()] == ["public.orders", "public.customers"]
