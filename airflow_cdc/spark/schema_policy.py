"""What the apply job does when a source table's schema changes: the policy, with Flink CDC's
names (``schema.change.behavior``) where they fit.

======== ====================================================================================
evolve   create missing tables; add columns; widen types the target can widen; a column the
         source dropped becomes nullable in the target and gets NULL in every row changed after
lenient  (the default) the same, except that a dropped column keeps its values: never drop,
         never narrow, never erase
ignore   create missing tables; then apply the columns the target has, logging each column it
         leaves out (or whose type it keeps) once
exception create nothing, change nothing: a table or column the target lacks stops the job, as
         before schema evolution existed
======== ====================================================================================

A rename is a drop and an add (the change events carry no rename). A change the target cannot
take by widening (``text -> integer``) stops the job under every policy but ``ignore``, with a
message naming the table, the column, both types and the fix; nothing of that batch is committed,
and a rerun after the fix applies from it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from airflow_cdc.engine.errors import ConfigError, ConfigProblem

log = logging.getLogger(__name__)

POLICIES = ("evolve", "lenient", "ignore", "exception")
DEFAULT_POLICY = "lenient"
#: The key the policy travels under in a target's settings.
SETTING = "schema.change.policy"


def checked_policy(value: object, key: str = "schema_change_policy") -> str:
    policy = str(value if value not in (None, "") else DEFAULT_POLICY).strip().lower()
    if policy not in POLICIES:
        raise ConfigError([ConfigProblem(key, f"unknown schema change policy {value!r}", " | ".join(POLICIES))])
    return policy


def policy_of(settings: Mapping[str, str]) -> str:
    """The policy a target's settings carry (the default when they carry none)."""
    return checked_policy(settings.get(SETTING), SETTING)


def creates(policy: str) -> bool:
    """Whether the policy creates a target table that does not exist yet."""
    return policy != "exception"


def evolves(policy: str) -> bool:
    """Whether the policy adds and widens columns."""
    return policy in ("evolve", "lenient")


_SAID: set[tuple[str, ...]] = set()


def say_once(*what: str, message: str) -> None:
    """Log ``message`` once per process for ``what`` (a table and a column): ``ignore`` names
    each column it leaves out once, not once per batch."""
    if what not in _SAID:
        _SAID.add(what)
        log.warning("%s", message)
