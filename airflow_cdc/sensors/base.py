"""What the airflow-cdc sensors share: deferrable by default, with poke mode available, and one
judge of the trigger's event for both.

Deferrable whatever Airflow's ``[operators] default_deferrable`` says (False unless set): that
default suits short waits, and a CDC wait - a snapshot, catching up - lasts minutes to hours, a
worker slot held all along. ``deferrable=False`` pokes (mode ``poke`` or ``reschedule``).

``execute()`` looks for up to ``defer_after`` seconds in the task first and defers only if the
wait is not over by then; ``execute_complete()`` only judges the event. Besides answering a
short wait at once, that keeps the sensors out of a race in Airflow 3.3's scheduler: a trigger
that fires within seconds of the deferral requeues the task before the deferring worker's
"success" arrives, and that stale event then fails the resumed task as "changed externally"
(apache/airflow#67287, #71580, #72716; the first real run of the README's DAG met it on
``caught_up``). A poke is one look of the same trigger, run to completion on a short-lived event loop,
so both modes follow exactly the same rules; in poke mode the trigger (and what it learnt, such
as a notification cursor) lives as long as the task's ``execute()``.

When ``timeout`` passes, Airflow's sensor timeout names the fault the instance retries at that
moment, if it retries one (a lost connection): that is why the wait took too long.
"""

from __future__ import annotations

import abc
import asyncio
import time
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperatorLink, BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowSensorTimeout

from airflow_cdc.hooks.engine import CdcEngineHook
from airflow_cdc.links import CdcInstanceLink
from airflow_cdc.operators.base import CdcOperatorError, CdcUnavailableError
from airflow_cdc.triggers.base import CdcEngineTrigger, Payload
from airflow_cdc.triggers.progress import retry_note

#: How long a deferrable sensor looks in the task before it defers (see the module's docstring):
#: longer than a deferring worker takes to exit (about 5 s in Airflow 3.3) plus a scheduler loop.
DEFER_AFTER = 15.0
#: At most this long between two of those looks.
FAST_PATH_INTERVAL = 1.0


class CdcBaseSensor(BaseSensorOperator):
    """Base of the airflow-cdc sensors.

    :param cdc_conn_id: the engine instance's connection (type ``cdc_engine``).
    :param deferrable: wait in the triggerer, freeing the worker slot (default True: a CDC wait
        is long); False pokes every ``poke_interval``.
    :param poke_interval: seconds between two looks at the instance (deferred or not).
    :param defer_after: deferrable: seconds the task itself looks (every second at most) before
        it defers; a wait over by then ends without the triggerer. 0 defers at once.
    :param unavailable_timeout: seconds the instance may not answer (restarting, stopped)
        before the task fails, naming the fix; it then stays retriable.
    """

    operator_extra_links: tuple[BaseOperatorLink, ...] = (CdcInstanceLink(),)
    ui_color = "#e8f1f8"

    def __init__(
        self,
        *,
        cdc_conn_id: str = CdcEngineHook.default_conn_name,
        deferrable: bool = True,
        poke_interval: timedelta | float = 5.0,
        unavailable_timeout: float = 60.0,
        defer_after: float = DEFER_AFTER,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        if unavailable_timeout < 0:
            raise ValueError(f"unavailable_timeout must be seconds >= 0, not {unavailable_timeout!r}")
        if defer_after < 0:
            raise ValueError(f"defer_after must be seconds >= 0, not {defer_after!r}")
        self.defer_after = defer_after
        self.cdc_conn_id = cdc_conn_id
        self.deferrable = deferrable
        self.unavailable_timeout = unavailable_timeout
        self._poking: CdcEngineTrigger | None = None

    @abc.abstractmethod
    def trigger(self) -> CdcEngineTrigger:
        """The trigger of this wait, from the (rendered) arguments."""

    @abc.abstractmethod
    def succeeded(self, context: Context, event: Payload) -> Any:
        """What a successful wait returns (its XCom), and its side effects (asset events)."""

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                raise AirflowSensorTimeout(self.timed_out(exc)) from exc
        deadline = time.monotonic() + min(self.defer_after, float(self.timeout))
        while self.defer_after > 0:
            looked = self.poke(context)
            if isinstance(looked, PokeReturnValue) and looked.is_done:
                return looked.xcom_value
            if time.monotonic() >= deadline:
                break
            time.sleep(min(FAST_PATH_INTERVAL, float(self.poke_interval)))
        if self.defer_after > 0:
            self.log.info("not done after %.0fs: waiting in the triggerer", self.defer_after)
        self.defer(trigger=self.trigger(), method_name="execute_complete", timeout=timedelta(seconds=self.timeout))

    def execute_complete(self, context: Context, event: Payload) -> Any:
        return self.judge(context, event)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except AirflowSensorTimeout as exc:  # the deferral's timeout, as Airflow words it
            raise AirflowSensorTimeout(self.timed_out(exc)) from exc

    def timed_out(self, timeout: Exception) -> str:
        """Airflow's timeout message, and the fault the instance retries now if it does."""
        try:
            note = asyncio.run(_retry_note_now(self.cdc_conn_id))
        except Exception as exc:  # the timeout is the news: a status that cannot be read only adds that
            return f"{timeout}; the instance's status could not be read ({type(exc).__name__}: {exc})"
        return f"{timeout}; {note}" if note else str(timeout)

    def poke(self, context: Context) -> bool | PokeReturnValue:
        if self._poking is None:
            self._poking = self.trigger()
        payload = asyncio.run(_look_once(self._poking))
        if payload is None:
            return False
        return PokeReturnValue(is_done=True, xcom_value=self.judge(context, payload))

    def judge(self, context: Context, event: Payload) -> Any:
        message = str(event.get("message") or event)
        if event.get("status") == "success":
            self.log.info("%s", message)
            return self.succeeded(context, event)
        if event.get("retriable"):
            raise CdcUnavailableError(message)
        raise CdcOperatorError(message)


async def _retry_note_now(cdc_conn_id: str) -> str:
    backend = await CdcEngineHook(cdc_conn_id).get_async_backend()
    try:
        return retry_note(await backend.status())
    finally:
        await backend.aclose()


async def _look_once(trigger: CdcEngineTrigger) -> Payload | None:
    try:
        return await trigger.poll()
    finally:
        await trigger.close()  # its client belongs to this event loop
