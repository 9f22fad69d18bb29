"""``iceberg:`` target URLs: a Hadoop catalog in a directory, configured by the job, or a Spark
catalog the user configured; both accepted where target URLs are checked."""

from __future__ import annotations

import pytest

from airflow_cdc.engine.errors import ConfigError
from airflow_cdc.spark.job_config import ApplyConfig
from airflow_cdc.spark.targets import LAKE_SCHEMES, scheme_of
from airflow_cdc.spark.targets.lake_iceberg import catalog_conf


def test_a_path_is_a_hadoop_catalog_there_named_by_the_path() -> None:
    name, conf = catalog_conf("iceberg:/data/lake")
    assert name.startswith("cdc_iceberg_") and name == catalog_conf("iceberg:///data/lake")[0]
    assert conf == {
        f"spark.sql.catalog.{name}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{name}.type": "hadoop",
        f"spark.sql.catalog.{name}.warehouse": "/data/lake",
        f"spark.sql.catalog.{name}.cache-enabled": "false",
    }
    assert catalog_conf("iceberg:/other")[0] != name  # one catalog per directory, in one session


def test_a_named_catalog_is_the_users_and_needs_no_conf_from_the_job() -> None:
    assert catalog_conf("iceberg:catalog=lake_prod") == ("lake_prod", {})
    with pytest.raises(ConfigError, match="bad Iceberg catalog name"):
        catalog_conf("iceberg:catalog=a.b")
    with pytest.raises(ConfigError, match="without a path"):
        catalog_conf("iceberg:")


def test_iceberg_urls_are_lake_targets_a_dag_may_name() -> None:
    assert scheme_of("iceberg:/data/lake") in LAKE_SCHEMES
    assert ApplyConfig(target_url="iceberg:/data/lake").target_url == "iceberg:/data/lake"
    assert ApplyConfig(target_url="iceberg:catalog=lake").target_url == "iceberg:catalog=lake"
