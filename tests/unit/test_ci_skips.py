"""CI must not pass by skipping (tests/requirements.py): a tiny suite whose tests need a module
that is not installed runs under pytest's own ``pytester``, with the same hooks the real suite
registers, under CI=true (failures) and CI=false (skips), next to an honest skip that stays one
and is listed with its reason."""

from __future__ import annotations

from glob import escape

import pytest

pytest_plugins = ["pytester"]

ABSENT = "airflow_cdc_no_such_module"

#: The hooks tests/conftest.py registers (imported, as the module is already loaded here).
CONFTEST = (
    "from tests.requirements import pytest_make_collect_report, pytest_runtest_makereport, pytest_terminal_summary"
)
MYSQL_EXTRA, CONFLUENT_EXTRA = escape("pip install 'airflow-cdc[mysql]'"), escape("airflow-cdc[confluent]")

TESTS_NEEDING_IT = f"""
import pytest
from tests.requirements import require_module

def test_needs_the_extra():
    require_module({ABSENT!r}, extra="mysql")

@pytest.fixture
def client():
    return pytest.importorskip({ABSENT!r})

def test_uses_a_fixture_that_importorskips(client):
    pass

def test_on_an_external_server():
    pytest.skip("CDC_TEST_PG_DSN points at a server the tests cannot restart")

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    raise AssertionError

def test_runs():
    pass
"""

MODULE_NEEDING_IT = f"""
from tests.requirements import require_module

require_module({ABSENT!r}, extra="confluent")

def test_never_collected():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_needing_it=TESTS_NEEDING_IT)
    return pytester


def test_under_ci_a_missing_module_fails_the_tests_that_need_it(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest()
    result.assert_outcomes(passed=1, failed=1, errors=1, skipped=1, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"*{ABSENT!r} is not installed*{MYSQL_EXTRA}*",
            "*Under CI=true a test that cannot run for want of an install step fails*",
            "*skipped tests: what this run did not check*",
            "1 skipped, honest: CDC_TEST_PG_DSN points at a server the tests cannot restart "
            + escape("[test_needing_it.py::test_on_an_external_server]"),
        ]
    )


def test_under_ci_a_module_that_needs_a_missing_module_is_a_collection_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_module_needing_it=MODULE_NEEDING_IT)
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # "1 error during collection": nothing ran
    result.stdout.fnmatch_lines(["*ERROR collecting test_module_needing_it.py*", f"*{CONFLUENT_EXTRA}*"])


@pytest.mark.parametrize("ci", ["false", ""])
def test_outside_ci_they_skip_and_are_listed(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    suite.makepyfile(test_module_needing_it=MODULE_NEEDING_IT)
    result = suite.runpytest()
    result.assert_outcomes(passed=1, skipped=4, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines_random(
        [
            "*skipped tests: what this run did not check*",
            f"1 skipped, missing dependency (fails under CI=true): missing dependency: {ABSENT!r} is not installed*"
            f"{MYSQL_EXTRA}*test_needing_it.py::test_needs_the_extra?",
            f"1 skipped, missing dependency (fails under CI=true): could not import {ABSENT!r}*",
            f"1 skipped, missing dependency (fails under CI=true):*{CONFLUENT_EXTRA}*?test_module_needing_it.py?",
            "1 skipped, honest: CDC_TEST_PG_DSN points at a server the tests cannot restart*",
        ]
    )
