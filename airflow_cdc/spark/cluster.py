"""What running the apply job on a cluster master takes, checked before spark-submit starts.

No pyspark here (the operator checks its master when a DAG file is parsed). Only the driver runs
where the task runs (client deploy mode, ADR 0015); the checks say what a cluster needs that
``local[*]`` does not: a master URL spark-submit takes, a standalone master that answers, and
paths the task's later runs (checkpoint) and the executors (lake targets) can reach.
"""

from __future__ import annotations

import re

from airflow_cdc.engine.errors import CdcError


class SparkMasterError(CdcError):
    """The master URL or deploy mode cannot work: the message says what to give instead."""


class SparkMasterUnreachable(CdcError):
    """Nothing answers at a ``spark://`` master's address (it may come back: worth a retry)."""


_MASTER_FORMS = (
    r"local(\[(\*|[1-9]\d*)(,\d+)?\])?",
    r"local-cluster\[\d+,\d+,\d+\]",
    r"spark://[^\s/,:]+(:\d+)?(,[^\s/,:]+(:\d+)?)*/?",
    r"yarn",
    r"k8s://\S+",
)
MASTER_HINT = "local[N], local[*], spark://host:port (standalone), yarn or k8s://https://host:port"


def is_local(master: str) -> bool:
    """Whether the executors run in the driver's JVM (``local``, ``local[N]``)."""
    return master == "local" or master.startswith("local[")


def check_master(master: str, deploy_mode: str | None = None) -> None:
    """Refuse a master URL spark-submit would not take, and the cluster deploy mode."""
    if not any(re.fullmatch(form, master) for form in _MASTER_FORMS):
        raise SparkMasterError(f"master {master!r} is not a Spark master URL: use {MASTER_HINT}")
    if deploy_mode not in (None, "client", "cluster"):
        raise SparkMasterError(f"deploy mode {deploy_mode!r}: use client (the default)")
    if deploy_mode == "cluster":
        # The driver would run on the cluster: no log here, no result line for XCom, and
        # killing the task would not end it (standalone refuses Python apps in cluster mode).
        raise SparkMasterError(
            "deploy mode 'cluster' is not supported: the apply job's driver runs in the Airflow task "
            "(client mode), which streams its log, returns its counts and ends it when the task is killed"
        )


def check_reachable(master: str, timeout: float = 5.0) -> None:
    """For a ``spark://`` master: some of its addresses accepts TCP connections. Without this,
    a wrong address costs spark-submit a minute of registration retries before a vague error."""
    if not master.startswith("spark://"):
        return  # yarn and k8s find their cluster from their own configuration
    from airflow_cdc.local.ports import port_open
    from airflow_cdc.local.spark_cluster import master_addresses

    addresses = master_addresses(master)
    if not any(port_open(port, host, timeout) for host, port in addresses):
        where = ", ".join(f"{host}:{port}" for host, port in addresses)
        raise SparkMasterUnreachable(
            f"no Spark master answers at {master} (nothing accepts connections on {where}): "
            "is the master running, and is that its RPC address (port 7077 by default, not its web UI's 8080)?"
        )


def storage_warnings(master: str, checkpoint: str, target_url: str) -> list[str]:
    """What a cluster run should be told about paths on this machine's disk."""
    if is_local(master):
        return []
    out = []
    if "://" not in checkpoint or checkpoint.startswith("file:"):
        out.append(
            f"checkpoint {checkpoint!r} is on this machine's disk: only the driver (this task) writes it, but "
            "every run of the task must find it - use storage every Airflow worker that may run the task "
            "shares (hdfs://, s3a://, a shared mount); a run that does not find it replays every change "
            "(a no-op on the target, but slow)"
        )
    kind, _, path = target_url.partition(":")
    if kind in ("delta", "parquet", "iceberg") and "://" not in path and not path.startswith("catalog="):
        out.append(
            f"target {target_url!r} is a local path: on a cluster the executors write it, so it must be "
            "storage every executor and this task share"
        )
    return out
