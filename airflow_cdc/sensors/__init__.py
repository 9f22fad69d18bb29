"""Sensors of airflow-cdc (deferrable by default): snapshot completion, offset progress, consumer lag."""
