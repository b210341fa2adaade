"""The evaluation loop: one asyncio loop on a daemon thread, off the application's threads.

Jobs are handed over through a deque; the loop is woken at most once per batch of
submissions, so `submit` costs the application a deque append and, now and then,
one self-pipe write. Only admitted spans become jobs, so the deque never holds more
than `queue_size` of them. On the loop, up to `concurrency` consumer tasks take the
jobs one after another: no task per job. The loop answers heartbeats so that the
watchdog can tell a loop an evaluator has blocked, and replace it (see `watchdog.py`);
a job's own time limit is its handler's business (`evaluation.py`).

Executor threads never keep the process alive: `asyncio.to_thread` and
`run_in_executor(None, ...)` use the loop's default executor, whose threads the
interpreter joins at exit (and refuses new work from once exit has begun). An evaluator
hanging in such a thread would keep the application from exiting; the loop's executor
here (`DaemonThreads`) starts daemon threads, neither joined nor refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, ParamSpec, TypeVar

from opentelemetry import context as otel_context

from tracefact._clock import SYSTEM, Clock
from tracefact._imports import stop_litellm_worker
from tracefact._otel import suppressed_context

logger = logging.getLogger("tracefact")

SLICE_SECONDS = 0.005
"""How long a consumer runs jobs back to back before it lets the loop run its other work."""

Job = TypeVar("Job")
P = ParamSpec("P")
T = TypeVar("T")


class Worker(Generic[Job]):
    """Runs `handle(job)` for each submitted job on a private event loop thread.

    At most `concurrency` jobs run at once.
    """

    def __init__(
        self,
        handle: Callable[[Job], Coroutine[object, object, None]],
        name: str,
        concurrency: int,
        clock: Clock = SYSTEM,
    ) -> None:
        self._handle = handle
        self._clock = clock
        self._name = name
        self._concurrency = concurrency
        self._incoming: deque[Job] = deque()
        self._wake_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._consumers: set[asyncio.Task[object]] = set()  # taking jobs from the deque
        # Evaluation never traces itself: a judge's litellm call does not become an LLM span.
        self._context = suppressed_context()
        self._start_lock = threading.Lock()  # two first submissions must start one thread
        self._stopping = False
        self.beat_at = clock.now()
        """When the loop last ran a heartbeat (or started), on the pipeline's clock."""

    def submit(self, job: Job) -> None:
        """Queue `job` for the loop; starts the loop thread on first use."""
        self._incoming.append(job)
        loop = self._loop or self._start()
        if not self._wake_scheduled:
            self._wake_scheduled = True  # a racing second wake-up only finds an empty deque
            # A loop stopped meanwhile raises; the owner accounts for the job.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._drain, context=self._context)

    def ping(self) -> None:
        """Ask the loop to record a heartbeat; a loop that does not is stuck."""
        loop = self._loop
        if loop is not None and not self._stopping:
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                loop.call_soon_threadsafe(self._beat)

    def _beat(self) -> None:
        self.beat_at = self._clock.now()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                loop.set_default_executor(DaemonThreads(f"{self._name}-thread"))
                self.beat_at = self._clock.now()
                self._thread = threading.Thread(
                    target=self._run, args=(loop,), name=self._name, daemon=True
                )
                self._thread.start()
                self._loop = loop
            return self._loop

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            while not self._stopping:
                try:
                    loop.run_forever()
                except BaseException:  # e.g. SystemExit out of a callback: keep serving
                    logger.exception("tracefact: evaluation loop interrupted; resuming")
        finally:
            loop.close()

    def _drain(self) -> None:
        """Start consumers for the jobs submitted, up to `concurrency` running at once.

        A consumer runs jobs one after another in its own task while the deque has any:
        a task per job cost the loop more than an instant evaluator's whole run.
        """
        self._wake_scheduled = False
        wanted = min(len(self._incoming), self._concurrency - len(self._consumers))
        for _ in range(wanted):
            self._consumer()

    def _consumer(self) -> None:
        self._consumers.add(self._loop_task(self._consume()))

    async def _consume(self) -> None:
        """Run jobs from the deque until it is empty, the worker stops or the task left.

        Every `SLICE_SECONDS` it lets the loop run its other work (heartbeats, jobs whose
        reply has come). Each job starts in the suppressed context the task started in,
        as a task of its own would: one job's context never reaches the next.
        """
        task = asyncio.current_task()
        consumers, incoming, clock = self._consumers, self._incoming, asyncio.get_running_loop()
        suppressed = otel_context.get_current()
        try:
            yield_at = clock.time() + SLICE_SECONDS
            while incoming and task in consumers and not self._stopping:
                if otel_context.get_current() is not suppressed:  # a job left its own attached
                    otel_context.attach(suppressed)
                await self._logged(incoming.popleft())
                if clock.time() >= yield_at:
                    await asyncio.sleep(0)
                    yield_at = clock.time() + SLICE_SECONDS
        finally:
            consumers.discard(task)

    def leave(self, task: asyncio.Task[object]) -> None:
        """`task` gives its place on the loop up (on the loop's thread), once.

        A job whose evaluator ignores its cancellation ends without it: its consumer
        stops taking jobs once it is free, and another takes its place now.
        """
        if task in self._consumers:
            self._consumers.discard(task)
            if self._incoming:
                self._consumer()

    def _loop_task(self, coroutine: Coroutine[object, object, None]) -> asyncio.Task[None]:
        assert self._loop is not None
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _logged(self, job: Job) -> None:
        try:
            await self._handle(job)
        except (asyncio.CancelledError, GeneratorExit):
            raise  # cancelled, or an abandoned loop's task closed at exit: nothing failed
        except BaseException:  # a bug in handling must not kill the loop
            logger.exception("tracefact: evaluation job failed")

    def stop(self, timeout: float) -> None:
        """Cancel what is still running and end the thread, waiting up to `timeout`.

        Jobs not started are left in the deque: the owner accounts for every job it
        handed over. With `timeout` 0, a stuck loop stops whenever it is freed.
        """
        loop, thread = self._loop, self._thread
        self._stopping = True
        if loop is None or thread is None:
            return

        async def cancel_all() -> None:
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:  # bounded: a task may swallow its cancellation
                await asyncio.wait(list(self._tasks), timeout=1.0)
            await stop_litellm_worker()  # its task would outlive the loop, noisily
            loop.stop()

        # A loop left blocked by an evaluator keeps its tasks until the process ends; their
        # jobs were finished already, so their destruction at exit is not worth a report.
        loop.set_exception_handler(_quiet_about_abandoned_tasks)
        try:
            loop.call_soon_threadsafe(lambda: loop.create_task(cancel_all()))
        except RuntimeError:  # loop already closed
            return
        if timeout > 0:
            thread.join(timeout)


def _quiet_about_abandoned_tasks(
    loop: asyncio.AbstractEventLoop, context: dict[str, object]
) -> None:
    """A stopped loop's exception handler: pending tasks destroyed at exit are expected."""
    message = context.get("message")
    if isinstance(message, str) and message.startswith("Task was destroyed but it is pending"):
        return
    loop.default_exception_handler(context)


class DaemonThreads(ThreadPoolExecutor):
    """One daemon thread per call (asyncio requires a ThreadPoolExecutor type).

    Calls are few and long (a model batch, a blocking client), so a thread per call
    costs little next to the call, and a call that never returns holds one thread only.
    """

    def __init__(self, name: str) -> None:
        super().__init__(max_workers=1, thread_name_prefix=name)
        self._name = name

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Run `fn(*args, **kwargs)` on a new daemon thread."""
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # the caller gets every failure, as from a pool
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name=self._name, daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to join: the threads end with their calls or with the process."""
