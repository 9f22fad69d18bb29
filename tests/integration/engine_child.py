"""Child process: an engine (any source) writing every event it delivers to an append-only log.
argv: config JSON, log path, offsets path. SIGTERM stops it cleanly."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from airflow_cdc.engine import Engine, JsonSerializer


def main() -> None:
    config, log_path, offsets = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    # The newline first ends a line a killed run left half-written (a big write can be cut short
    # by kill -9); its records were never marked processed, so they come again.
    os.write(log, f"\nrun {os.getpid()}\n".encode())

    class Handler:
        def handle_batch(self, records, committer) -> None:
            # When each batch was delivered: the crash test computes its duplicate bound from it.
            lines = [f"batch {time.time():.6f} {len(records)}\n".encode()]
            for item in records:
                key = item.key.decode() if item.key else "null"
                value = item.value.decode() if item.value else "null"
                lines.append(f'{{"key":{key},"value":{value}}}\n'.encode())
            data = memoryview(b"".join(lines))
            while data:  # a write may be short; only a kill leaves a line cut
                data = data[os.write(log, data) :]
            committer.mark_all_processed()

    engine = Engine(
        {**config, "offset.storage": "file", "offset.storage.file.filename": offsets},
        batch_handler=Handler(),
        serializer=JsonSerializer(),
    )
    signal.signal(signal.SIGTERM, lambda *_: engine.close())
    engine.run()


if __name__ == "__main__":
    main()
