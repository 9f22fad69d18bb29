"""Fixtures the Spark integration modules share."""

from tests.integration.spark.evolution_support import empty_target, evolving_source

__all__ = ["empty_target", "evolving_source"]
