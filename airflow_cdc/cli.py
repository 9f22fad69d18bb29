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
    demo.add_argument("--writes", type=int, default=600, help="transactions in the write load (default 600)")
    demo.add_argument("--show", type=int, default=4, help="events printed (default 4)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "demo":
        from airflow_cdc.demo import run_demo

        try:
            run_demo(writes=args.writes, show=args.show)
        except (AssertionError, TimeoutError) as exc:
            print(f"demo check FAILED: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
