"""``airflow-cdc`` command line."""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow-cdc", description="Change-data-capture for Apache Airflow.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log the engine's state changes")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the end-to-end demo on embedded defaults")
    demo.add_argument("--events", type=int, default=4000, help="events per task (default 4000)")
    demo.add_argument("--show", type=int, default=5, help="events printed in full (default 5)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "demo":
        from airflow_cdc.demo import run_demo

        try:
            run_demo(events=args.events, show=args.show)
        except AssertionError as exc:
            print(f"demo check FAILED: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
