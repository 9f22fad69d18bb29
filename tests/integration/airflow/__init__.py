"""Integration tests of the Airflow layer. Airflow reads AIRFLOW_HOME when it is first imported: a
throwaway one unless the caller chose one."""

from tests.airflow_home import throwaway_airflow_home

throwaway_airflow_home("airflow-cdc-tests-")
