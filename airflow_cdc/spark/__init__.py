"""The Spark apply job: captured changes → last change per key → a target, exactly once.

No Airflow here (``CdcSparkApplyOperator`` launches it); the engine imports nothing from here.
``apply.py`` is the spark-submit entry point, ``frames.py`` the contracts between the steps.
"""
