"""CI must not pass by skipping: a test that cannot run because an extra (or a program) is not
installed skips on a developer's machine and fails under ``CI=true`` (``bash scripts/test`` sets
it unless told ``CI=false``). A skip for an honest reason - a server the tests may not restart
or change - stays a skip, and the end of the run lists those reasons.

Tests ask for an optional module with :func:`require_module`, at module level or inside a test
or fixture. The hooks below, registered by ``tests/conftest.py``, recognise such skips by their
reason (:data:`MISSING`, or ``pytest.importorskip``'s "could not import") and turn them into
failures under CI: a test's skip becomes that test's failure, a module's skip a collection
error, which, as any module that cannot be imported, stops the run before tests run.
"""

from __future__ import annotations

import importlib
import os
from collections import defaultdict
from collections.abc import Generator
from types import ModuleType
from typing import Any

import pytest

#: How a skip says a dependency is missing (the hooks look for it).
MISSING = "missing dependency:"
#: pytest.importorskip's reason, for a call not yet moved to require_module.
_IMPORTORSKIP = "could not import "


def require_module(module: str, *, extra: str) -> ModuleType:
    """The module, or a skip naming it and the extra that installs it (a failure under CI)."""
    __tracebackhide__ = True  # the skip is reported at the caller's line
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.skip(
            f"{MISSING} {module!r} is not installed ({exc}): pip install 'airflow-cdc[{extra}]' "
            "(bash scripts/setup installs every extra)",
            allow_module_level=True,
        )


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def _missing(report: pytest.CollectReport | pytest.TestReport) -> bool:
    if not report.skipped or hasattr(report, "wasxfail"):
        return False
    reason = _reason(report)
    return reason.startswith((MISSING, _IMPORTORSKIP))


def _fail_under_ci(report: pytest.CollectReport | pytest.TestReport) -> None:
    if in_ci() and _missing(report):
        report.longrepr = (
            f"{_reason(report)}\nUnder CI=true a test that cannot run for want of an install step fails "
            "instead of skipping (CI=false lets it skip on a developer's machine)."
        )
        report.outcome = "failed"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _fail_under_ci(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    _fail_under_ci(report)
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Every skip, grouped by reason: what this run did not check, and why."""
    by_reason: dict[str, list[str]] = defaultdict(list)
    for report in terminalreporter.stats.get("skipped", []):
        if not hasattr(report, "wasxfail"):
            by_reason[_reason(report)].append(report.nodeid)
    if not by_reason:
        return
    terminalreporter.write_sep("-", "skipped tests: what this run did not check")
    for reason, nodeids in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        kind = "missing dependency (fails under CI=true)" if reason.startswith((MISSING, _IMPORTORSKIP)) else "honest"
        shown = ", ".join(nodeids[:3]) + (f" and {len(nodeids) - 3} more" if len(nodeids) > 3 else "")
        terminalreporter.write_line(f"{len(nodeids)} skipped, {kind}: {reason} [{shown}]")
