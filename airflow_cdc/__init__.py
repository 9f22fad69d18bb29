"""airflow-cdc: change-data-capture pipelines for Apache Airflow.

The CDC engine lives in :mod:`airflow_cdc.engine` and imports neither Airflow nor PySpark.
"""

__version__ = "0.1.0"
