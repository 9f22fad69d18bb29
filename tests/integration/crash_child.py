"""Child process of the crash tests: the synthetic source through the engine into an
append-only log of what the consumer saw, with offsets in a file. SIGTERM stops it cleanly."""

from __future__ import annotations

import argparse
import os
import signal

from airflow_cdc.engine import Engine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True)
    parser.add_argument("--mode", choices=["ordered", "unordered", "batch"], required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--rate", type=int, default=8000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--flush-ms", type=int, default=50)
    args = parser.parse_args()

    # kill -9 can cut a write short (the kernel checks for a fatal signal between pages), so the
    # marker starts with a newline that ends such a line, and every line ends with "." before
    # its newline: a line without it was cut, and the reader skips it (its record was not
    # processed, so it was not committed either, and a later run delivers it again).
    log = os.open(os.path.join(args.state, "seen.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(log, f"\nrun {os.getpid()}\n".encode())

    def line(item) -> bytes:
        return f"{item.record.partition['task']} {item.record.offset['seq']}.\n".encode()

    def consume(item) -> None:
        os.write(log, line(item))

    class Handler:
        def handle_batch(self, records, committer) -> None:
            os.write(log, b"".join(line(r) for r in records))
            committer.mark_all_processed()
            committer.mark_batch_finished()

    from airflow_cdc.engine import JsonSerializer

    consumers = {"batch_handler": Handler()} if args.mode == "batch" else {"consumer": consume}
    engine = Engine(
        {
            "name": "crash-test",
            "connector.class": "synthetic",
            "tasks.max": args.tasks,
            "synthetic.rate": args.rate,
            "synthetic.max.events": args.events,
            "max.batch.size": args.batch,
            "offset.storage.file.filename": os.path.join(args.state, "offsets.json"),
            "offset.flush.interval.ms": args.flush_ms,
            "record.processing.order": "UNORDERED" if args.mode == "unordered" else "ORDERED",
            "record.processing.threads": 4,
        },
        serializer=JsonSerializer(),
        **consumers,
    )
    signal.signal(signal.SIGTERM, lambda *_: engine.close())
    engine.run()


if __name__ == "__main__":
    main()
