"""Which databases and tables a MySQL/MariaDB connector captures: Debezium's include/exclude lists."""

from __future__ import annotations

import re
from typing import Any

_SYSTEM = frozenset(("mysql", "information_schema", "performance_schema", "sys"))


class TableFilter:
    """Debezium's include/exclude lists (regexes on ``db`` and ``db.table``, whole-name
    matches); the signal table is captured whatever they say."""

    def __init__(self, settings: dict[str, Any]) -> None:
        def compile_all(key: str) -> list[re.Pattern[str]]:
            return [re.compile(p, re.I) for p in settings[key]]

        self.db_in, self.db_out = compile_all("database.include.list"), compile_all("database.exclude.list")
        self.t_in, self.t_out = compile_all("table.include.list"), compile_all("table.exclude.list")
        self.signal = str(settings["signal.data.collection"]).lower()

    def database(self, database: str) -> bool:
        """Whether the database's tables may be captured (its schema changes are)."""
        if database in _SYSTEM:
            return False
        return (not self.db_in or any(p.fullmatch(database) for p in self.db_in)) and not any(
            p.fullmatch(database) for p in self.db_out
        )

    def __call__(self, database: str, table: str) -> bool:
        if database in _SYSTEM:
            return False
        name = f"{database}.{table}"
        if self.signal and name.lower() == self.signal:
            return True
        if self.db_in and not any(p.fullmatch(database) for p in self.db_in):
            return False
        if any(p.fullmatch(database) for p in self.db_out):
            return False
        if self.t_in and not any(p.fullmatch(name) for p in self.t_in):
            return False
        return not any(p.fullmatch(name) for p in self.t_out)
