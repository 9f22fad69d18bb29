"""What the airflow-cdc triggers share: the engine instance's async client, reached through the
``cdc_engine`` connection in :meth:`run` (the kwargs carry the connection's id, never its
token), one look at a time (:meth:`CdcEngineTrigger.check`), and exactly one final event.

An instance that does not answer (restarting, not started yet) is asked again until
``unavailable_timeout`` seconds passed without an answer; then the event is an error naming
the fix. Every other engine error ends the wait at once with the engine's words.

An instance that answers RETRYING (it retries a lost connection on its own) is waited for as
any other: :meth:`CdcEngineTrigger.retry_note` logs the cause when it changes, and a wait that
fails meanwhile names it.

Events are ``{"status": "success" | "failed" | "error", "message", ...}``: ``failed`` is what
was waited for going wrong (a snapshot aborted), ``error`` the wait itself (a wrong token);
``retriable`` says whether a retry of the task may succeed.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_cdc.backends import START_FIX, AsyncEngineBackend, InstanceNotRunningError
from airflow_cdc.engine.errors import ApiError, ApiUnavailableError, CdcError, RefusedError
from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.operators.base import explain
from airflow_cdc.triggers.progress import retry_note

Payload = dict[str, Any]


def failed(message: str, **data: Any) -> Payload:
    return {"status": "failed", "message": message, "retriable": False, **data}


def error(message: str, *, retriable: bool = False) -> Payload:
    return {"status": "error", "message": message, "retriable": retriable}


class NoAnswer(Exception):
    """Raised by :meth:`CdcEngineTrigger.check`: something besides the instance (a Kafka broker)
    does not answer now; asked again until ``unavailable_timeout``, then an error naming ``fix``."""

    def __init__(self, cause: Exception, fix: str) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.fix = fix


class CdcEngineTrigger(BaseTrigger, abc.ABC):
    """Base of the triggers that watch an engine instance through its control API.

    :param cdc_conn_id: the instance's connection (type ``cdc_engine``); resolved in ``run()``.
    :param poll_interval: seconds between two looks.
    :param unavailable_timeout: seconds the instance may not answer before the wait fails.
    """

    def __init__(self, cdc_conn_id: str, poll_interval: float = 5.0, unavailable_timeout: float = 60.0) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.cdc_conn_id = cdc_conn_id
        self.poll_interval = poll_interval
        self.unavailable_timeout = unavailable_timeout
        self._client: AsyncEngineBackend | None = None
        self._unanswered_since: float | None = None
        self._instance_checked = False
        self._retrying = ""  # the last retry_note, logged when it changes

    # -- serialization -------------------------------------------------------------------------
    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", self.kwargs()

    def kwargs(self) -> dict[str, Any]:
        """The constructor's arguments, JSON primitives (subclasses add theirs)."""
        return {
            "cdc_conn_id": self.cdc_conn_id,
            "poll_interval": self.poll_interval,
            "unavailable_timeout": self.unavailable_timeout,
        }

    # -- the wait ------------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            while True:
                payload = await self.poll()
                if payload is not None:
                    # Closed before the event: a runner that takes the first event and drops
                    # the generator (dag.test) must find nothing left to close.
                    await self.close()
                    yield TriggerEvent(payload)  # type: ignore[no-untyped-call]
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            await self.close()

    async def poll(self) -> Payload | None:
        """One look at the instance: the final event's payload, or None to look again."""
        try:
            client = await self._connect()
            payload = await self.check(client)
        except NoAnswer as exc:
            return await self._unavailable(exc.cause, exc.fix)
        except AirflowNotFoundException as exc:
            return error(f"{exc}: define the connection (Admin > Connections, or an AIRFLOW_CONN_<ID> variable)")
        except ApiUnavailableError as exc:
            return await self._unavailable(exc)
        except ApiError as exc:
            return error(str(explain(self.action, exc, self.cdc_conn_id)))
        except InstanceNotRunningError as exc:  # an instance beside the worker that is not running
            return await self._unavailable(exc)
        except RefusedError as exc:  # the API serves another instance
            return error(str(explain(self.action, exc, self.cdc_conn_id)))
        except CdcError as exc:
            return error(str(explain(self.action, exc, self.cdc_conn_id)))
        self._unanswered_since = None
        return payload

    @property
    def action(self) -> str:
        return f"{type(self).__name__} on connection {self.cdc_conn_id!r}"

    @abc.abstractmethod
    async def check(self, client: AsyncEngineBackend) -> Payload | None:
        """Look once; the final payload, or None."""

    async def retry_note(self, client: AsyncEngineBackend) -> str:
        """What the instance retries now ("" when nothing), logged when it changes. Only for the
        log and the messages: a status that cannot be read now is "" and the wait goes on."""
        try:
            note = retry_note(await client.status())
        except CdcError as exc:
            self.log.debug("no status for the retry note: %s", exc)
            return ""
        if note != self._retrying:
            if note:
                self.log.warning("%s; still waiting: it recovers on its own", note)
            else:
                self.log.info("the instance no longer retries")
            self._retrying = note
        return note

    async def with_retry_note(self, client: AsyncEngineBackend, message: str) -> str:
        """``message``, and the fault the instance retries now if it does: the likely reason."""
        note = await self.retry_note(client)
        return f"{message}; {note}" if note else message

    async def _connect(self) -> AsyncEngineBackend:
        if self._client is None:
            self._client = await CdcEngineHook(self.cdc_conn_id).get_async_backend()
            if not self._instance_checked:
                await self._client.verify()  # the API at this address serves the instance the connection names
                self._instance_checked = True
        return self._client

    async def _unavailable(self, exc: Exception, fix: str = START_FIX) -> Payload | None:
        """Not answering: look again later (with a new client: it may come back elsewhere),
        unless it has not answered for ``unavailable_timeout``; then an error naming ``fix``."""
        await self.close()
        now = time.monotonic()
        if self._unanswered_since is None:
            self._unanswered_since = now
        waited = now - self._unanswered_since
        if waited >= self.unavailable_timeout:
            if isinstance(exc, ApiError):
                reason = str(explain(self.action, exc, self.cdc_conn_id))
            else:
                reason = f"{self.action}: {exc}: {fix}"
            return error(f"{reason} (no answer for {waited:.0f}s)", retriable=True)
        self.log.warning("no answer (%s); asking again", exc)
        return None

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def cleanup(self) -> None:
        await self.close()
