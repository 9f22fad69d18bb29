"""``CdcSparkApplyOperator``'s keyword arguments from before the config groups, mapped onto them.

``CdcSparkApplyOperator(lanes=4, master="local[2]")`` still works for a deprecation period: each
old argument is the field of the same name in ``ApplyConfig`` (``job=``) or ``SubmitConfig``
(``submit=``), and the operator warns with the form to write instead. No Airflow here: the
operator raises the warning with Airflow's class.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from airflow_cdc.spark.job_config import ApplyConfig, SubmitConfig

#: Old keyword argument → ``ApplyConfig`` field of the same name.
JOB_ARGUMENTS = (
    "source",
    "topics",
    "topic_pattern",
    "bootstrap_servers",
    "changelog_dir",
    "target_url",
    "table_map",
    "lane_groups",
    "lanes",
    "settings",
    "checkpoint",
    "trigger",
    "max_duration",
    "max_records_per_batch",
)
#: Old keyword argument → ``SubmitConfig`` field of the same name.
SUBMIT_ARGUMENTS = (
    "master",
    "deploy_mode",
    "conf",
    "jars",
    "packages",
    "py_files",
    "python",
    "executor_python",
    "ship_package",
)


@dataclass(frozen=True)
class Regrouped:
    """The groups the operator runs with, and what to tell a DAG that used the old arguments."""

    job: ApplyConfig
    submit: SubmitConfig
    #: ``pass job=ApplyConfig(lanes=4) instead of lanes=4``; empty without old arguments.
    advice: str = ""


def _call(cls: type, values: dict[str, Any]) -> str:
    return f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in values.items())})"


def regroup(kwargs: MutableMapping[str, Any], job: ApplyConfig | None, submit: SubmitConfig | None) -> Regrouped:
    """Take the old arguments out of ``kwargs`` (what is left is BaseOperator's) into the groups.
    An old argument next to its group given as a whole is refused: one of them would be ignored."""
    # In the DAG's order, so that the advice reads as the call it replaces.
    old_job = {name: kwargs.pop(name) for name in list(kwargs) if name in JOB_ARGUMENTS}
    old_submit = {name: kwargs.pop(name) for name in list(kwargs) if name in SUBMIT_ARGUMENTS}
    for keyword, given, old, cls in (("job", job, old_job, ApplyConfig), ("submit", submit, old_submit, SubmitConfig)):
        if given is not None and old:
            names = ", ".join(old)
            raise ValueError(f"{names} and {keyword}= both given: move {names} into {keyword}={cls.__name__}(...)")
    new = [
        f"{keyword}={_call(cls, old)}"
        for keyword, old, cls in (("job", old_job, ApplyConfig), ("submit", old_submit, SubmitConfig))
        if old
    ]
    advice = ""
    if new:
        were = ", ".join(f"{name}={value!r}" for name, value in {**old_job, **old_submit}.items())
        advice = (
            f"pass {', '.join(new)} instead of {were} (from airflow_cdc.spark.job_config; "
            "the separate keyword arguments will be removed)"
        )
    return Regrouped(
        job=job if job is not None else ApplyConfig(**old_job),
        submit=submit if submit is not None else SubmitConfig(**old_submit),
        advice=advice,
    )
