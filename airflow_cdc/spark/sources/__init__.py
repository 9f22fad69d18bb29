"""Spark data sources of the apply job that Spark itself lacks (see ``reading.py``)."""
