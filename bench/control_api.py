"""Control API throughput: GET /status of a real engine instance against a bare stdlib server.

A throwaway PostgreSQL with a small table; the engine runs as a child process
(``airflow-cdc engine serve``, changelog sink, file offsets, api.port 0) until it streams. Its
API (FastAPI on uvicorn) gets N sequential GET /status over one keep-alive httpx client, then N
more from --threads threads, one keep-alive client each. Baseline, same run: a stdlib
``ThreadingHTTPServer`` (HTTP/1.1 keep-alive, TCP_NODELAY) in a child process that checks the
same bearer token (hmac.compare_digest) and answers the instance's own /status bytes, fetched
once and served verbatim - the ratio is the API's cost (framework, routing, auth, building the
status) over the least a Python HTTP server can do. Every answer is checked: 200 with the
instance's name (ours), the very bytes (baseline); a wrong token gets 401 on both. Reports
req/s, p50/p99 latency, RSS (VmRSS) of both processes, and the load average before and after.
The last line is one JSON object with the ratios.

``--engine-pythonpath /tmp/main0 --engine-command run`` measures another checkout's engine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_cdc.engine.server.client import EngineClient
from airflow_cdc.engine.server.instance_files import read_status
from airflow_cdc.engine.testing import wait_until
from airflow_cdc.local.postgres import PostgresServer

WARMUP = 50
ROWS = 1000
BASELINE_SERVER = r"""
import hmac, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY, TOKEN = open(sys.argv[1], "rb").read(), os.environ["BENCH_TOKEN"].encode()
REFUSED = b'{"error_code":401,"message":"missing or wrong bearer token"}'


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        given = self.headers.get("Authorization", "").removeprefix("Bearer ").strip().encode()
        ok = self.path == "/status" and bool(given) and hmac.compare_digest(given, TOKEN)
        data = BODY if ok else REFUSED
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@dataclass
class Run:
    rate: float
    p50_ms: float
    p99_ms: float
    answers: list[httpx.Response]

    def text(self) -> str:
        return f"{self.rate:8,.0f} req/s  p50 {self.p50_ms:6.2f} ms  p99 {self.p99_ms:6.2f} ms"


def load(url: str, token: str, threads: int, total: int) -> Run:
    """``total`` GET /status from ``threads`` threads, each over its own keep-alive client."""
    per = total // threads
    latencies: list[list[float]] = [[] for _ in range(threads)]
    answers: list[list[httpx.Response]] = [[] for _ in range(threads)]
    failures: list[BaseException] = []
    barrier = threading.Barrier(threads + 1, timeout=60)

    def worker(i: int) -> None:
        try:
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
                for _ in range(WARMUP):
                    client.get("/status")
                barrier.wait()
                for _ in range(per):
                    started = time.perf_counter()
                    answer = client.get("/status")
                    latencies[i].append(time.perf_counter() - started)
                    answers[i].append(answer)
        except BaseException as exc:
            failures.append(exc)
            barrier.abort()

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a worker failed: raised below
        barrier.wait()
    started = time.perf_counter()
    for thread in workers:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    flat = sorted(x * 1000 for each in latencies for x in each)
    cuts = statistics.quantiles(flat, n=100, method="inclusive")
    return Run(len(flat) / elapsed, cuts[49], cuts[98], [a for each in answers for a in each])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def check(run: Run, expect: str, good: object) -> None:
    """Every answer 200 with the instance's name (``expect="name"``) or the very bytes."""
    for answer in run.answers:
        if answer.status_code != 200:
            raise AssertionError(f"answer {answer.status_code}: {answer.text[:200]}")
        if expect == "name" and orjson.loads(answer.content).get("name") != good:
            raise AssertionError(f"answer without the instance's name: {answer.text[:200]}")
        if expect == "bytes" and answer.content != good:
            raise AssertionError(f"baseline answer differs: {answer.text[:200]}")


def refuses_wrong_token(url: str) -> None:
    answer = httpx.get(f"{url}/status", headers={"Authorization": "Bearer wrong"}, timeout=10)
    if answer.status_code != 401:
        raise AssertionError(f"{url}: a wrong token got {answer.status_code}")


def start_engine(config: Path, command: str, pythonpath: str | None, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    with log.open("ab") as out:  # cwd is not the checkout: `python -m` would import it first
        return subprocess.Popen(
            [sys.executable, "-m", "airflow_cdc.cli", "engine", command, "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=config.parent,
        )


def stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="requests per run (default 2000)")
    parser.add_argument("--threads", type=int, default=8, help="threads of the concurrent run (default 8)")
    parser.add_argument("--engine-pythonpath", help="PYTHONPATH of the engine process (another checkout)")
    parser.add_argument("--engine-command", default="serve", choices=["serve", "run"], help="engine serve|run")
    args = parser.parse_args()
    load_start = os.getloadavg()
    token = secrets.token_urlsafe(24)
    engine = baseline = None
    with PostgresServer() as server, tempfile.TemporaryDirectory(prefix="bench-control-api-") as tmp:
        work = Path(tmp)
        database = server.create_database("bench")
        with server.connect(database) as conn:
            conn.execute("create table t (id int primary key, v text, n int)")
            conn.execute("insert into t select g, 'v' || g, g from generate_series(1, %s) g", (ROWS,))
        config = {
            "name": "bench-api",
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "topic.prefix": "bench",
            "database.hostname": server.host,
            "database.port": server.port,
            "database.user": server.user,
            "database.dbname": database,
            "slot.name": "bench_api",
            "publication.name": "bench_api",
            "offset.storage": "file",
            "offset.flush.interval.ms": 100,
            "poll.interval.ms": 100,
            "state.dir": str(work / "state"),
            "sink.type": "changelog",
            "api.token": token,
            "api.port": 0,
        }
        path = work / "engine.yaml"
        path.write_text(yaml.safe_dump(config))
        log = work / "engine.log"
        try:
            engine = start_engine(path, args.engine_command, args.engine_pythonpath, log)

            def up() -> bool:
                status = read_status(work / "state") or {}
                return engine.poll() is not None or (status.get("pid") == engine.pid and bool(status.get("api")))

            wait_until(up, 120, "the engine's instance.json")
            if engine.poll() is not None:
                raise RuntimeError(f"the engine exited {engine.returncode}:\n{log.read_text()[-3000:]}")
            url = str(read_status(work / "state")["api"])  # type: ignore[index]
            with EngineClient(url, token) as client:
                wait_until(lambda: client.status().phase == "streaming", 120, "streaming")
            first = httpx.get(f"{url}/status", headers={"Authorization": f"Bearer {token}"}, timeout=10)
            body, server_header = first.content, first.headers.get("server", "?")
            refuses_wrong_token(url)
            (work / "status.json").write_bytes(body)
            baseline = subprocess.Popen(
                [sys.executable, "-c", BASELINE_SERVER, str(work / "status.json")],
                stdout=subprocess.PIPE,
                env={**os.environ, "BENCH_TOKEN": token},
            )
            assert baseline.stdout is not None
            base_url = f"http://127.0.0.1:{int(baseline.stdout.readline())}"
            refuses_wrong_token(base_url)
            engine_rss_before = rss_mb(engine.pid)
            runs: dict[str, tuple[Run, Run]] = {}
            for label, threads in (("sequential", 1), (f"{args.threads} threads", args.threads)):
                ours, base = load(url, token, threads, args.requests), load(base_url, token, threads, args.requests)
                check(ours, "name", config["name"])
                check(base, "bytes", body)
                runs[label] = (ours, base)
            engine_rss_after, baseline_rss = rss_mb(engine.pid), rss_mb(baseline.pid)
            with EngineClient(url, token) as client:
                if engine.poll() is not None or client.status().phase != "streaming":
                    raise RuntimeError("the engine stopped streaming during the runs")
        finally:
            if baseline is not None:
                baseline.terminate()
                baseline.wait(30)
            stop(engine)
    load_end = os.getloadavg()
    print(f"engine: {args.engine_command} {args.engine_pythonpath or '(this checkout)'}; server header {server_header}")
    print(f"GET /status: {len(body)} bytes, {args.requests} requests per run")
    figures: dict[str, object] = {"benchmark": "control_api", "requests": args.requests, "threads": args.threads}
    for label, (ours, base) in runs.items():
        rate_ratio, p50_ratio = ours.rate / base.rate, ours.p50_ms / base.p50_ms
        print(f"{label:12s} ours     {ours.text()}")
        print(f"{label:12s} baseline {base.text()}")
        print(f"{label:12s} ratio ours/baseline: req/s {rate_ratio:.3f}, p50 {p50_ratio:.3f}")
        key = "seq" if label == "sequential" else "concurrent"
        figures |= {
            f"{key}_req_per_s": round(ours.rate),
            f"{key}_baseline_req_per_s": round(base.rate),
            f"{key}_p50_ms": round(ours.p50_ms, 3),
            f"{key}_p99_ms": round(ours.p99_ms, 3),
            f"{key}_baseline_p50_ms": round(base.p50_ms, 3),
            f"{key}_baseline_p99_ms": round(base.p99_ms, 3),
            f"{key}_ratio": round(rate_ratio, 3),
            f"{key}_p50_ratio": round(p50_ratio, 3),
        }
    print(
        f"RSS: engine {engine_rss_before:.1f} MB streaming before the runs, {engine_rss_after:.1f} MB after; "
        f"baseline server {baseline_rss:.1f} MB"
    )
    print(f"load average: start {load_start[0]:.2f} {load_start[1]:.2f}, end {load_end[0]:.2f} {load_end[1]:.2f}")
    figures |= {
        "engine_rss_mb": round(engine_rss_after, 1),
        "engine_rss_before_mb": round(engine_rss_before, 1),
        "baseline_rss_mb": round(baseline_rss, 1),
        "loadavg_start": [round(x, 2) for x in load_start],
        "loadavg_end": [round(x, 2) for x in load_end],
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
