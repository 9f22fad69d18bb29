"""Where the JVM parts live: a ``java`` and the jars ``scripts/setup`` resolved with Maven.

``jvm/pom.xml`` pins Apache Kafka (broker and Connect) and Debezium's connectors; ``mvn package``
copies their runtime jars into ``$CDC_JARS`` (default ``.jars/`` at the repository root):

- ``kafka/``: the broker's and the Connect worker's classpath;
- ``connect-plugins/debezium-connector-<db>/``: one Connect plugin each.

A missing part is ``JvmPartsMissing``: one message that names ``bash scripts/setup``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from airflow_cdc.local.process import ServiceError

JARS_ENV_VAR = "CDC_JARS"
SETUP_HINT = "run `bash scripts/setup` (it resolves the jars with Maven into .jars/, or into $CDC_JARS)"


class JvmPartsMissing(ServiceError):
    """Java or the jars from ``scripts/setup`` are not there. An error, not a skip: after the
    setup command they must be there, and a suite that skipped Kafka would prove nothing."""


def jars_dir() -> Path:
    """``$CDC_JARS``, else ``.jars/`` at the root of the checkout this package runs from."""
    configured = os.environ.get(JARS_ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    return Path(__file__).resolve().parents[2] / ".jars"


def java() -> str:
    """The ``java`` to run: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        where = f"JAVA_HOME={home} has no bin/java" if home else "no JAVA_HOME"
        raise JvmPartsMissing(f"no `java` on PATH and {where}: {SETUP_HINT} (it installs a JDK)")
    return found


def classpath(part: str) -> str:
    """A ``-cp`` value for ``jars_dir()/part`` (``kafka``), checked to hold jars."""
    directory = jars_dir() / part
    if not any(directory.glob("*.jar")):
        raise JvmPartsMissing(f"no jars in {directory}: {SETUP_HINT}")
    return f"{directory}/*"


def plugin_path() -> Path:
    """The Connect ``plugin.path`` with Debezium's connectors, checked to hold at least one."""
    directory = jars_dir() / "connect-plugins"
    if not any(directory.glob("debezium-connector-*/*.jar")):
        raise JvmPartsMissing(f"no Debezium connectors in {directory}: {SETUP_HINT}")
    return directory


#: JVM options for the servers the tests start: a bounded heap, and no JMX/UI extras.
SERVER_JVM_OPTIONS = (
    "-Xms128m",
    "-Xmx768m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
    "-Dfile.encoding=UTF-8",
)


def log4j2_properties(path: Path, level: str = "INFO") -> Path:
    """A log4j2 configuration that writes to stdout (the service's log file)."""
    path.write_text(
        "status = warn\n"
        "appender.out.type = Console\n"
        "appender.out.name = out\n"
        "appender.out.layout.type = PatternLayout\n"
        "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
        f"rootLogger.level = {level}\n"
        "rootLogger.appenderRef.out.ref = out\n"
        # The broker's request log and the state-change log are noise in a test log.
        "logger.request.name = kafka.request.logger\nlogger.request.level = WARN\n"
        "logger.reflections.name = org.reflections\nlogger.reflections.level = ERROR\n"
    )
    return path
