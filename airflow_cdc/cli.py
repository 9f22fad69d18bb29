"""``airflow-cdc`` command line: thin over airflow_cdc.engine.server and airflow_cdc.demo.

Exit codes: 0 done, 1 failed, 2 invalid configuration (every problem listed), 3 refused
(e.g. changing offsets of a running instance). ``engine stop`` of an instance that is not
running exits 0, as ``systemctl stop`` of a stopped unit does (the goal, stopped, holds), and
says so: on stderr, and as state ``NOT_RUNNING`` in its JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Any

EXIT_FAILED, EXIT_CONFIG, EXIT_REFUSED = 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-cdc", description="Change-data-capture for Apache Airflow.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log the engine's state changes")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the end-to-end demo on embedded defaults")
    demo.add_argument("--rows", type=int, default=5000, help="rows of the sample orders table (default 5000)")
    demo.add_argument("--writes", type=float, default=20, help="write transactions per second (default 20; 0: none)")
    demo.add_argument("--kafka", action="store_true", help="Kafka sink on a throwaway broker (default: changelog)")
    demo.add_argument("--skip-airflow", action="store_true", help="leave out the part run with Airflow's dag.test()")

    engine = commands.add_parser("engine", help="run and manage engine instances").add_subparsers(
        dest="action", required=True
    )
    for action, text in (
        ("run", "run the instance in the foreground until SIGTERM/SIGINT or POST /stop"),
        ("serve", "serve the instance (a container's command): the API stays up, the engine started and stopped by it"),
        ("start", "start the instance detached; return once it is polling"),
        (
            "stop",
            "stop it gracefully (SIGTERM), wait, then SIGKILL; exit 0 also when it was not running "
            "(stderr says so; its JSON state is NOT_RUNNING)",
        ),
        ("status", "state, tasks, offsets, lag and counters"),
        ("check", "validate the configuration only"),
    ):
        sub = engine.add_parser(action, help=text)
        sub.add_argument("--config", required=True, type=Path, help="YAML or Java-properties file, Debezium keys")
        if action in ("start", "stop"):
            sub.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
        if action in ("run", "serve", "start", "check"):
            sub.add_argument("--strict", action="store_true", help="unknown keys are errors (as config.strict=true)")
        if action == "serve":
            sub.add_argument("--stopped", action="store_true", help="boot with the engine stopped (POST /start)")

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
            sub.add_argument(
                "--force",
                action="store_true",
                help="do not check the position against the source server's current one (refused when it is "
                "ahead of it, or when the server cannot be reached to tell)",
            )

    status = commands.add_parser("status", help="engine instances at a glance: health, lag, events/s, snapshots")
    _instance_arguments(status, "; none of the three: every such connection Airflow knows")
    status.add_argument("--json", action="store_true", help="print the instance's view as JSON (a list without NAME)")
    status.add_argument("--watch", action="store_true", help="refresh until Ctrl-C (JSON: one line per refresh)")
    status.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default 2)")

    snapshot = commands.add_parser("snapshot", help="follow snapshots").add_subparsers(dest="action", required=True)
    watch = snapshot.add_parser(
        "watch", help="live progress of a snapshot (rows, ETA, per table); exit 0 once it completed, 1 if it did not"
    )
    _instance_arguments(watch)
    watch.add_argument(
        "--id", dest="snapshot_id", metavar="SIGNAL_ID", help="its signal id (default: the running or latest)"
    )
    watch.add_argument("--interval", type=float, default=1.0, help="seconds between looks (default 1)")
    watch.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="with --id: how long an id the instance does not know may take to start (just signalled) "
        "before the watch gives up, exit 1 (default 10)",
    )
    pipeline = commands.add_parser("pipeline", help="declared pipelines (YAML)").add_subparsers(
        dest="action", required=True
    )
    check = pipeline.add_parser("check", help="validate a pipeline file: every problem with its line and key")
    check.add_argument("file", type=Path, help="the pipeline's YAML file, e.g. dags/pipelines/shop.yaml")
    return parser


#: The width ``status`` and ``snapshot watch`` render to when stdout is no terminal: wider than
#: any line (rich pads no line to the width; a table is as wide as its cells).
LOG_WIDTH = 1_000_000
#: Where ``--url`` finds the API's token when ``--token`` is not given (a token in argv is visible to ``ps``).
TOKEN_ENV = "CDC_ENGINE_TOKEN"


def _instance_arguments(parser: argparse.ArgumentParser, more: str = "") -> None:
    """NAME, --config or --url: which instance ``status`` / ``snapshot watch`` look at."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("name", nargs="?", metavar="NAME", help=f"an Airflow connection id of type cdc_engine{more}")
    which.add_argument("--config", type=Path, help="or the config file of an instance running on this machine")
    which.add_argument("--url", help="or the control API's address, e.g. http://127.0.0.1:8765")
    parser.add_argument("--token", help=f"the API's token with --url (default: ${TOKEN_ENV})")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose or getattr(args, "action", None) == "run" else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "demo":
        return _demo(args)
    if args.command == "pipeline":
        return _pipeline_check(args.file)
    from airflow_cdc.engine.errors import CdcError, ConfigError, RefusedError

    try:
        if args.command in ("status", "snapshot"):
            return _watching(args)
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
    from airflow_cdc.demo import DemoFailed, DemoOptions, run_demo

    options = DemoOptions(rows=args.rows, writes=args.writes, kafka=args.kafka, airflow=not args.skip_airflow)
    try:
        run_demo(options)
    except DemoFailed as exc:
        print(f"demo FAILED: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("demo interrupted; everything it started was stopped and removed", file=sys.stderr)
        return 130
    return 0


def _pipeline_check(path: Path) -> int:
    """The validation a DAG file rendering the pipeline runs when Airflow parses it."""
    from airflow_cdc.pipeline.spec import PipelineSpecError, load_pipeline_file

    try:
        spec = load_pipeline_file(path)
    except PipelineSpecError as exc:
        print(f"invalid pipeline {path} ({len(exc.problems)} problem(s)):", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_CONFIG
    if spec.tables is not None:
        tables = f"{len(spec.tables)} table(s): {', '.join(t.name for t in spec.tables)}"
    else:
        tables = f"the tables matching {spec.table_pattern.pattern!r} (found when the DAG is parsed)"  # type: ignore[union-attr]
    print(f"pipeline OK: {spec.dag_id}, {tables}; snapshot policy {spec.snapshot.policy}")
    return 0


def _engine(args: argparse.Namespace) -> int:
    from airflow_cdc.engine.server import control
    from airflow_cdc.engine.server.config_file import load_config_file
    from airflow_cdc.engine.server.instance import EngineInstance
    from airflow_cdc.engine.server.instance_files import validated

    props = load_config_file(args.config)
    if args.action in ("run", "serve", "start", "check"):
        config = validated(props, strict=True if args.strict else None)  # ConfigError: every problem
        if args.action not in ("run", "serve"):  # a running engine logs them itself
            for warning in config.warnings:
                print(f"warning: {warning.key} {warning.message} (fix: {warning.fix})", file=sys.stderr)
    if args.action == "check":
        print(f"configuration OK{f' ({len(config.warnings)} warning(s))' if config.warnings else ''}")
        return 0
    if args.action == "run":
        return EngineInstance(props).run()
    if args.action == "serve":
        return EngineInstance(props, serve=True, start_stopped=args.stopped).run()
    if args.action == "start":
        _print(control.start_detached(args.config.resolve(), props, args.timeout))
        return 0
    if args.action == "stop":
        return _stop(props, args.timeout)
    _print(control.status(props))
    return 0


def _stop(props: dict[str, Any], timeout: float) -> int:
    """The status the instance stopped with; if it was not running, that, plainly: the status it
    wrote last is an earlier run's and would read as the result of this stop."""
    from airflow_cdc.engine.server import control
    from airflow_cdc.engine.server.instance_files import state_dir

    stopped = control.stop(props, timeout)
    if stopped is not None:
        _print(stopped)
        return 0
    directory = state_dir(props)
    last = control.status(props).get("state")  # STOPPED, DEAD (killed) or NEVER_STARTED
    name = props.get("name")
    print(f"instance {name!r} was not running, nothing to stop (its state: {directory}, last {last})", file=sys.stderr)
    _print({"name": name, "state": "NOT_RUNNING", "state_dir": str(directory), "last_state": last})
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
        if args.offset:
            offset = args.offset
            offsets_admin.check_not_ahead(props, offset, force=args.force)
        else:
            offset = offsets_admin.position_offset(props, args.position, force=args.force)
        changed = offsets_admin.set_offset(props, offset, args.partition)
        _print({**changed, "position": positions.format(changed["offset"])})
    else:
        _print({"removed": offsets_admin.reset(props, args.partition)})
    return 0


def _watching(args: argparse.Namespace) -> int:
    """``status`` and ``snapshot watch``, rendered by airflow_cdc.console."""
    import contextlib

    from airflow_cdc.engine.errors import MissingDependencyError

    try:
        from rich.console import Console

        from airflow_cdc import console  # noqa: F401 - a missing rich or Airflow named here
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "rich", "airflow") from None
    screen = Console(file=sys.stdout, highlight=False)
    if not screen.is_terminal:
        # A file or a pipe has no width: rich would guess one ($COLUMNS, else 80) and cut or fold
        # every longer line to it. A log keeps each line whole; a reader's pager wraps if it must.
        screen = Console(file=sys.stdout, highlight=False, width=LOG_WIDTH)
    # stdout carries the answer only (`status --json` is read by scripts): Airflow, once imported,
    # logs to whatever sys.stdout is when a logger is first used.
    with contextlib.redirect_stdout(sys.stderr):
        return _watch(args, screen)


def _watch(args: argparse.Namespace, screen: Any) -> int:
    from airflow_cdc import console  # imported by _watching, which says what is missing

    if args.command == "status" and not (args.name or args.config or args.url):
        instances = _instances()
        return console.show_status(
            instances.observe, screen, single=False, as_json=args.json, watch=args.watch, interval=args.interval
        )
    if not (args.name or args.config or args.url):
        print("snapshot watch: give NAME (an Airflow connection id), --config FILE or --url URL", file=sys.stderr)
        return EXIT_CONFIG
    monitor = _monitor(args)
    if args.command == "status":
        return console.show_status(
            lambda: [monitor.observe()],
            screen,
            single=True,
            as_json=args.json,
            watch=args.watch,
            interval=args.interval,
        )
    return console.follow_snapshot(
        monitor.observe,
        screen,
        label=monitor.label,
        snapshot_id=args.snapshot_id,
        interval=args.interval,
        wait=console.UNKNOWN_ID_WAIT if args.wait is None else args.wait,
        listing=f"airflow-cdc status {_named(args)}",
    )


def _named(args: argparse.Namespace) -> str:
    """The instance as the command line named it, to repeat in a hint."""
    if args.name:
        return shlex.quote(args.name)
    if args.config:
        return f"--config {shlex.quote(str(args.config))}"
    return f"--url {shlex.quote(args.url)}"


def _instances() -> Any:
    import os

    from airflow_cdc.engine.errors import MissingDependencyError

    # Airflow warns at each lookup of a connection type with "_" (ours is cdc_engine): at every refresh.
    os.environ.setdefault("AIRFLOW__LOGGING__NAMESPACE_LEVELS", "airflow.models.connection=ERROR")
    try:
        from airflow_cdc.ui.instances import Instances
    except ImportError as exc:  # connections need Airflow; --config and --url do not
        raise MissingDependencyError(exc.name or "airflow", "airflow") from None
    return Instances()


def _monitor(args: argparse.Namespace) -> Any:
    """A Monitor of the instance named by NAME, --config or --url."""
    import os

    from airflow_cdc.engine.server.client import EngineClient
    from airflow_cdc.engine.server.config_file import load_config_file
    from airflow_cdc.engine.server.control import client_for
    from airflow_cdc.monitoring import Monitor

    if args.name:
        return _instances().monitor(args.name)
    if args.config:
        props = load_config_file(args.config)  # ConfigError: unreadable; a stopped instance is seen as unreachable
        return Monitor(str(props.get("name") or args.config.stem), lambda: client_for(props))
    token = args.token or os.environ.get(TOKEN_ENV)
    return Monitor(args.url, lambda: EngineClient(args.url, token))


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


if __name__ == "__main__":
    sys.exit(main())
