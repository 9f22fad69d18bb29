"""Single message transforms, configured the Kafka Connect way."""

from airflow_cdc.engine.transforms.base import FunctionTransform, Transform, TransformChain
from airflow_cdc.engine.transforms.factory import build_transform_chain
from airflow_cdc.engine.transforms.filter import Filter
from airflow_cdc.engine.transforms.route import RegexRouter
from airflow_cdc.engine.transforms.unwrap import ExtractNewRecordState

__all__ = [
    "ExtractNewRecordState",
    "Filter",
    "FunctionTransform",
    "RegexRouter",
    "Transform",
    "TransformChain",
    "build_transform_chain",
]
