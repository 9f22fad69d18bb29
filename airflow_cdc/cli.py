"""``airflow-cdc`` command line: thin over airflow_cdc.engine.server and airflow_cdc.demo.

Exit codes: 0 done, 1 failed, 2 invalid configuration (every problem listed), 3 refused
(e.g. changing offsets of a running instance).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

EXIT_FAILED, EXIT_CONFIG, EXIT_REFUSED = 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-cdc", description="Change-data-capture for Apache Airflow.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log the engine's state changes")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the end-to-end demo on embedded defaults")
    demo.add_argument("--writes", type=int, default=600, help="transactions in the write load (default 600)")
    demo.add_argument("--show", type=int, default=4, help="events printed (default 4)")

    engine = commands.add_parser("engine", help="run and manage engine instances").add_subparsers(
        dest="action", required=True
    )
    for action, text in (
        ("run", "run the instance in the foreground until SIGTERM/SIGINT or POST /stop"),
        ("start", "start the instance detached; return once it is polling"),
        ("stop", "stop it gracefully (SIGTERM), wait, then SIGKILL"),
        ("status", "state, tasks, offsets, lag and counters"),
        ("check", "validate the configuration only"),
    ):
        sub = engine.add_parser(action, help=text)
        sub.add_argument("--config", required=True, type=Path, help="YAML or Java-properties file, Debezium keys")
        if action in ("start", "stop"):
            sub.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
        if action in ("run", "start", "check"):
            sub.add_argument("--strict", action="store_true", help="unknown keys are errors (as config.strict=true)")

    offsets = commands.add_parser("offsets", help="show, set or reset a stopped instance's offsets").add_subparsers(
        dest="action", required=True
    )
    for action, text in (
        ("show", "every partition and its committed offset"),
        ("set", "seek: set a partition's offset (the instance must be stopped)"),
        ("reset", "forget offsets: the next start begins as a first start (the instance must be stopped)"),
    ):
        sub = offsets.add_parser(action, help=text)
        sub.add_argument("--config", required=True, type=Path, help="the instance's configuration file")
        if action in ("set", "reset"):
            sub.add_argument("--partition", type=json.loads, help='the partition as JSON, e.g. {"server": "shop"}')
        if action == "set":
            where = sub.add_mutually_exclusive_group(required=True)
            where.add_argument(
                "--position",
                "--lsn",
                "--binlog",
                "--gtid",
                dest="position",
                metavar="POSITION",
                help="resume right after this position, as the source writes them: a PostgreSQL LSN "
                "(0/16B3748); MySQL binlog FILE:POS or a GTID set (--lsn, --binlog, --gtid are other names)",
            )
            where.add_argument("--offset", type=json.loads, help="the offset as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose or getattr(args, "action", None) == "run" else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "demo":
        return _demo(args)
    from airflow_cdc.engine.errors import CdcError, ConfigError, RefusedError

    try:
        return _engine(args) if args.command == "engine" else _offsets(args)
    except ConfigError as exc:
        print(f"invalid configuration in {args.config}:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem.key}: {problem.message} (fix: {problem.fix})", file=sys.stderr)
        for warning in exc.warnings:
            print(f"warning: {warning.key} {warning.message} (fix: {warning.fix})", file=sys.stderr)
        return EXIT_CONFIG
    except RefusedError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except CdcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _demo(args: argparse.Namespace) -> int:
    from airflow_cdc.demo import run_demo

    try:
        run_demo(writes=args.writes, show=args.show)
    except (AssertionError, TimeoutError) as exc:
        print(f"demo check FAILED: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _engine(args: argparse.Namespace) -> int:
    from airflow_cdc.engine.server import control
    from airflow_cdc.engine.server.config_file import load_config_file
    from airflow_cdc.engine.server.instance import EngineInstance, validated

    props = load_config_file(args.config)
    if args.action in ("run", "start", "check"):
        config = validated(props, strict=True if args.strict else None)  # ConfigError: every problem
        if args.action != "run":  # a running engine logs them itself
            for warning in config.warnings:
                print(f"warning: {warning.key} {warning.message} (fix: {warning.fix})", file=sys.stderr)
    if args.action == "check":
        print(f"configuration OK{f' ({len(config.warnings)} warning(s))' if config.warnings else ''}")
        return 0
    if args.action == "run":
        return EngineInstance(props).run()
    if args.action == "start":
        _print(control.start_detached(args.config.resolve(), props, args.timeout))
        return 0
    if args.action == "stop":
        _print(control.stop(props, args.timeout) or {"name": props.get("name"), "state": "NOT_RUNNING"})
        return 0
    _print(control.status(props))
    return 0


def _offsets(args: argparse.Namespace) -> int:
    from airflow_cdc.engine.positions import codec_for
    from airflow_cdc.engine.server import offsets_admin
    from airflow_cdc.engine.server.config_file import load_config_file

    props = load_config_file(args.config)
    positions = codec_for(props)
    if args.action == "show":
        shown = offsets_admin.show(props)
        _print({"offsets": [{**entry, "position": positions.format(entry["offset"])} for entry in shown]})
    elif args.action == "set":
        offset = args.offset or offsets_admin.position_offset(props, args.position)
        changed = offsets_admin.set_offset(props, offset, args.partition)
        _print({**changed, "position": positions.format(changed["offset"])})
    else:
        _print({"removed": offsets_admin.reset(props, args.partition)})
    return 0


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


if __name__ == "__main__":
    sys.exit(main())
