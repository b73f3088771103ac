"""Group commit: one thread handles every submission waiting at that moment in one call.

Why: a burst of submits (64 clients x 4 at once) would otherwise cost each submit its own thread
hop from the event loop and its own SQLite transaction, serialised behind the store's
write lock, so the last submit of the burst waited behind ~1 ms of work per earlier one.
Here the event loop only queues the request body and awaits a future; one admission
thread takes the first waiting item, then every item that queued up meanwhile, and
hands them to ``handle`` together (which validates each and commits the valid ones in
ONE transaction). No timer holds a lone submit back: a batch is exactly what arrived
while the previous batch was being committed, so a quiet controller answers at once
and a busy one amortises the commit over the burst.

Durability before acknowledgement is kept: a future resolves only after ``handle``
returned, i.e. after the commit. A future cancelled before its batch started (the
client went away) is dropped unhandled; one cancelled later is handled anyway (its
submission id makes the client's retry find it).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: At most this many items per call (bounds one transaction's size and latency).
MAX_BATCH = 512

_STOP = object()


class GroupCommit(Generic[T, R]):
    """``put(item)`` returns a ``Future``; ``handle(items)`` returns one result or
    exception per item, in order, and runs on this object's single thread."""

    def __init__(self, handle: Callable[[list[T]], list[R | BaseException]], name: str, max_batch: int = MAX_BATCH):
        self._handle = handle
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[tuple[T, Future[R]] | object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, item: T) -> Future[R]:
        future: Future[R] = Future()
        self._queue.put((item, future))
        return future

    def close(self, timeout: float = 10.0) -> None:
        """Handle what is queued, then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _take(self) -> tuple[list[tuple[T, Future[R]]], bool]:
        """The next batch: block for one item, then take whatever else is waiting."""
        batch: list[tuple[T, Future[R]]] = []
        entry = self._queue.get()
        while True:
            if entry is _STOP:
                return batch, True
            item, future = entry  # type: ignore[misc]
            if future.set_running_or_notify_cancel():
                batch.append((item, future))
            if len(batch) >= self._max_batch:
                return batch, False
            try:
                entry = self._queue.get_nowait()
            except queue.Empty:
                return batch, False

    def _run(self) -> None:
        stop = False
        while not stop:
            batch, stop = self._take()
            if not batch:
                continue
            try:
                results = self._handle([item for item, _ in batch])
            except BaseException as exc:  # every waiter gets the failure
                results = [exc] * len(batch)
            for (_, future), result in zip(batch, results, strict=True):
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
