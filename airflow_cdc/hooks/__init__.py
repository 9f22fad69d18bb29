"""Airflow hooks of airflow-cdc: they own connections and hand out the engine's clients."""
