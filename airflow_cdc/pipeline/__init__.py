"""Pipelines declared once, in YAML, rendered as tasks (ADR 0029).

``spec`` (the file's model and its validation) and ``yaml_lines`` import no Airflow: the
``airflow-cdc pipeline check`` command uses them. :class:`CdcPipeline` (``render``) needs Airflow
and is imported from here lazily, so that the command line does not pay for it.
"""

from __future__ import annotations

from typing import Any

from airflow_cdc.pipeline.spec import (
    PipelineProblem,
    PipelineSpec,
    PipelineSpecError,
    load_pipeline_file,
    parse_pipeline,
)

__all__ = [
    "CdcPipeline",
    "PipelineProblem",
    "PipelineSpec",
    "PipelineSpecError",
    "load_pipeline_file",
    "parse_pipeline",
    "pipeline_dag",
]


def __getattr__(name: str) -> Any:
    if name in ("CdcPipeline", "pipeline_dag"):
        from airflow_cdc.pipeline import render

        return getattr(render, name)
    raise AttributeError(name)
