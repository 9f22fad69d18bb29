"""Triggers of the airflow-cdc sensors: async I/O through the engine's client, one final event each."""
