"""Print the differences of a dumped oracle run, one per line, for reading them at leisure:

CDC_ORACLE_DUMP=/tmp/oracle.json pytest tests/compat
python -m tests.compat.show_differences /tmp/oracle.json [VARIANT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.compat.oracle import MARIADB_RULES, POSTGRES_RULES, Event, compare


def main(argv: list[str]) -> None:
    dump = json.loads(Path(argv[0]).read_text())
    for variant in argv[1:] or list(dump):
        theirs, ours = ({t: [Event(**e) for e in es] for t, es in side.items()} for side in dump[variant])
        connectors = {e.value["source"].get("connector") for es in theirs.values() for e in es if e.value}
        rules = MARIADB_RULES if connectors & {"mariadb", "mysql"} else POSTGRES_RULES
        for problem in compare(theirs, ours, rules):
            print(f"[{variant}] {problem[:500]}")


if __name__ == "__main__":
    main(sys.argv[1:])
