"""The fault driver: each fault a small class - ``inject()`` breaks something real, ``hold()``
lets the write load go on while it is broken, ``heal()`` mends it - and a seeded schedule of
them (:func:`schedule`).

Every fault acts on the scenario's own processes and servers (``h``, the runner's harness:
``h.engine``, ``h.server``, ``h.broker``, ``h.mounts``, ``h.load``, ``h.rng``, ``h.admin()``),
never on the servers the rest of the test session shares.

``restarts_engine``: the engine may exit because of the fault (a local disk it cannot write);
the runner, as its supervisor, starts it again and counts it. Any other exit of the engine fails
the scenario: a lost connection or a restarted server must be retried in-process.
``repeats``: the fault may make the engine deliver events again (its offsets were behind what it
had delivered); for the others a repeated event fails the scenario.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
from typing import Any, ClassVar


class Fault:
    name: ClassVar[str] = ""
    sources: ClassVar[tuple[str, ...]] = ("postgres", "mariadb")
    restarts_engine: ClassVar[bool] = False
    #: The fault itself stops the engine (until its heal starts it).
    stops_engine: ClassVar[bool] = False
    repeats: ClassVar[bool] = False
    #: Transactions the load writes while the fault lasts (a range, drawn from the seed).
    hold_transactions: ClassVar[tuple[int, int]] = (40, 160)

    def inject(self, h: Any) -> None:
        raise NotImplementedError

    def hold(self, h: Any) -> None:
        wanted = h.rng.randint(*self.hold_transactions)
        h.wait(h.load.progressed(wanted), 180, f"{wanted} transactions during {self.name}")

    def heal(self, h: Any) -> None:
        """Nothing to mend: the engine must find its own way back."""

    def __repr__(self) -> str:
        return self.name


class ServerDown(Fault):
    """A fault that takes the source server down: the load cannot write meanwhile, so the fault
    holds until the load has failed to reconnect a number of times (drawn from the seed)."""

    def hold(self, h: Any) -> None:
        wanted = h.load.reconnects + h.rng.randint(3, 20)
        h.wait(lambda: h.load.reconnects >= wanted, 120, f"the load locked out by {self.name}")


class EngineKill(Fault):
    """kill -9 of the engine instance mid-stream; heal: start it again."""

    name = "engine kill -9"
    stops_engine = True
    repeats = True

    def inject(self, h: Any) -> None:
        h.engine.kill()

    def heal(self, h: Any) -> None:
        h.engine.start()


class ConnectWorkerKill(EngineKill):
    """kill -9 of the Kafka Connect worker running Debezium's connector; heal: start it again."""

    name = "connect worker kill -9"
    sources = ("postgres",)


class SparkDriverKill(Fault):
    """kill -9 of the Spark apply job's driver once it has applied a batch or more (drawn from
    the seed); heal: run it again, from its checkpoint."""

    name = "spark driver kill -9"
    sources = ("postgres",)

    def inject(self, h: Any) -> None:
        wanted = h.apply.batches() + h.rng.randint(1, 3)
        h.wait(lambda: h.apply.batches() >= wanted, 300, f"the driver at batch {wanted}")
        h.apply_down = True
        h.apply.kill()

    def heal(self, h: Any) -> None:
        h.apply.start()
        h.apply_down = False


class ConsumerFarBehind(Fault):
    """The engine frozen (SIGSTOP) while the source goes on writing: it falls far behind, the slot
    or the binlog keeps what it has not read; heal: SIGCONT, and it must catch up."""

    name = "consumer far behind"
    hold_transactions = (300, 600)

    def inject(self, h: Any) -> None:
        h.engine.signal(signal.SIGSTOP)

    def heal(self, h: Any) -> None:
        h.engine.signal(signal.SIGCONT)


class OffsetsUnavailable(Fault):
    """The offset store's file system read-only (a tmpfs remounted ``ro``) for a while."""

    name = "offsets file unavailable"
    #: The engine retries the commit (status RETRYING) and goes on: a restart by its supervisor
    #: would fail the scenario. What was delivered meanwhile is committed at the next commit, so
    #: nothing repeats unless a later fault restarts the engine.
    repeats = True

    def inject(self, h: Any) -> None:
        h.mounts["offsets"].read_only(True)

    def heal(self, h: Any) -> None:
        h.mounts["offsets"].read_only(False)


class ChangelogDiskFull(Fault):
    """The changelog's file system (a small tmpfs) filled up but for a page or two, when a big
    row (40 kB) comes, with every earlier segment published: that row's line is the write that
    runs out of space, part-way. Held until the engine has run into the full disk (its log
    says so); freed at once. The sink writes the segment again from its records until there is
    room (status RETRYING): the engine must not exit."""

    name = "changelog disk full"
    repeats = True
    #: Pages left free (a range drawn from the seed): the big line's write starts, then fails.
    leave_pages: ClassVar[tuple[int, int]] = (1, 3)

    def inject(self, h: Any) -> None:
        h.load.pause()
        h.settle()
        h.mounts["changelog"].fill(leave=4096 * h.rng.randint(*self.leave_pages))
        h.load.probe(big=True)
        h.load.resume()

    def hold(self, h: Any) -> None:
        h.wait(lambda: h.engine.logged("No space left on device"), 120, "the engine hitting the full disk")

    def heal(self, h: Any) -> None:
        h.mounts["changelog"].free()


class ChangelogDiskFullNoRoom(ChangelogDiskFull):
    """As :class:`ChangelogDiskFull`, with not a page left: the big line's write fails before
    writing anything, as the first line of a new segment."""

    name = "changelog disk full, no page left"
    leave_pages = (0, 0)


class PgRestartImmediate(ServerDown):
    """``pg_ctl stop -m immediate`` (a crash: no shutdown checkpoint, recovery at start), then start."""

    name = "pg restart -m immediate"
    sources = ("postgres",)
    #: The server sends again from the slot's confirmed position, behind what was delivered (as
    #: to Debezium): what was delivered after the last commit comes again.
    repeats = True

    def inject(self, h: Any) -> None:
        from airflow_cdc.local.postgres import _as_postgres

        server = h.server
        command = [str(server.bindir / "pg_ctl"), "stop", "-D", str(server.data_dir), "-m", "immediate", "-w"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, **_as_postgres())
        assert done.returncode == 0, done.stderr
        server._process.wait(60)  # the postmaster is our child: reap it, so start() starts it again

    def heal(self, h: Any) -> None:
        h.server.start()


class PgTerminateWalsender(Fault):
    """``pg_terminate_backend`` of the engine's walsender: its replication connection is cut."""

    name = "pg_terminate_backend walsender"
    sources = ("postgres",)
    #: The server sends again from the slot's confirmed position, behind what was delivered (as
    #: to Debezium): what was delivered after the last commit comes again.
    repeats = True

    def inject(self, h: Any) -> None:
        query = (
            "select pg_terminate_backend(active_pid) from pg_replication_slots"
            " where slot_name = %s and active_pid is not null"
        )
        h.wait(lambda: h.admin().execute(query, (h.slot,)).fetchall(), 60, "a walsender to terminate")


class PgTerminateReaders(Fault):
    """``pg_terminate_backend`` of the engine's other connections (the incremental snapshot's
    reader among them), while a snapshot window is being read."""

    name = "pg_terminate_backend readers"
    sources = ("postgres",)
    #: The catalog connection is among them: the stream is reopened with it (see above).
    repeats = True

    def inject(self, h: Any) -> None:
        query = (
            "select pg_terminate_backend(pid) from pg_stat_activity"
            " where application_name = %s and backend_type = 'client backend'"
        )
        h.wait(lambda: h.admin().execute(query, (h.application,)).fetchall(), 60, "a reader to terminate")


class MariaDbHardRestart(ServerDown):
    """kill -9 of mariadbd (crash recovery at start), then start it on the same port."""

    name = "mariadb kill -9"
    sources = ("mariadb",)

    def inject(self, h: Any) -> None:
        process = h.server._process
        os.kill(process.pid, signal.SIGKILL)
        process.wait(60)

    def heal(self, h: Any) -> None:
        h.server.start()


class MariaDbKillBinlog(Fault):
    """``KILL`` of the engine's binlog dump connection, from the server side."""

    name = "mariadb KILL binlog dump"
    sources = ("mariadb",)

    def inject(self, h: Any) -> None:
        def kill() -> bool:
            with h.admin().cursor() as cur:
                cur.execute("select id from information_schema.processlist where command like 'Binlog Dump%'")
                ids = [row[0] for row in cur.fetchall()]
                for thread in ids:
                    cur.execute(f"kill {int(thread)}")
            return bool(ids)

        h.wait(kill, 60, "a binlog dump connection to kill")


class KafkaBrokerKill(Fault):
    """kill -9 of the Kafka broker the engine delivers to (it keeps its log); heal: start it."""

    name = "kafka broker kill -9"

    def inject(self, h: Any) -> None:
        h.broker.kill()

    def heal(self, h: Any) -> None:
        h.broker.start()


def schedule(pool: tuple[type[Fault], ...], count: int, rng: random.Random) -> list[Fault]:
    """``count`` faults drawn from ``pool`` by the scenario's seeded generator."""
    return [rng.choice(pool)() for _ in range(count)]
