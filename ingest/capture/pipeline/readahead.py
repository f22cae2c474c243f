"""Reading one batch ahead: the input is read and parsed in a thread while the run's own thread
writes the previous batch to the database.

The thread only iterates (reads the file, parses, assembles); it never touches the database,
which stays with the run's thread and its transaction. At most one batch waits ahead of the one
being written, so memory stays bounded by about two batches. A failure on either side ends the
run exactly as it did when reading and writing took turns: a parsing error is raised in the run's
thread after the batches before it were written; a write error stops the thread (what it read
ahead is dropped, never written) and is raised once the thread has ended, before the input is
closed. The batches are the same either way, so the job's counters and watermark are too.

``gc_quiet`` keeps the garbage collector off the objects that were alive when a run started
(Django, the app: ``gc.freeze``) and collects the young generation less often while a batch's
many short-lived objects come and go; both are restored when the outermost run ends.
"""

from __future__ import annotations

import gc
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")

THREAD_NAME = "ingest-read-ahead"
# A young-generation collection every this many allocations (CPython's default: 700) during a run.
RUN_GC_THRESHOLD = 50_000

_ITEM, _END, _ERROR = 0, 1, 2


class ReadAhead(Generic[T]):
    """Iterates ``source`` in a thread, ``depth`` items ahead of the caller; a context manager
    (leaving it stops the thread and waits for it). Iterate it from one thread only."""

    def __init__(self, source: Iterator[T], depth: int = 1) -> None:
        self._source = source
        self._queue: queue.SimpleQueue[tuple[int, object]] = queue.SimpleQueue()
        self._room = threading.Semaphore(depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name=THREAD_NAME, daemon=True)

    def __enter__(self) -> ReadAhead[T]:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _produce(self) -> None:
        try:
            while True:
                self._room.acquire()
                if self._stop.is_set():
                    return
                try:
                    item = next(self._source)
                except StopIteration:
                    self._queue.put((_END, None))
                    return
                self._queue.put((_ITEM, item))
        except BaseException as exc:  # handed to the run's thread, raised there
            self._queue.put((_ERROR, exc))
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()  # a generator's own clean-up runs in the thread that iterated it

    def __iter__(self) -> Iterator[T]:
        while True:
            kind, value = self._queue.get()
            if kind == _END:
                return
            if kind == _ERROR:
                assert isinstance(value, BaseException)
                raise value
            self._room.release()  # room for the next item while the caller works on this one
            yield value  # type: ignore[misc]

    def close(self) -> None:
        """Stop reading ahead and wait for the thread to end (idempotent)."""
        self._stop.set()
        self._room.release()  # wakes the thread if it waits for room
        if self._thread.is_alive() or self._thread.ident is not None:
            self._thread.join()


_quiet_lock = threading.Lock()
_quiet_depth = 0
_saved_threshold: tuple[int, int, int] | None = None


@contextmanager
def gc_quiet() -> Iterator[None]:
    """See the module docstring; nests (the outermost one restores)."""
    global _quiet_depth, _saved_threshold
    with _quiet_lock:
        _quiet_depth += 1
        if _quiet_depth == 1:
            _saved_threshold = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(RUN_GC_THRESHOLD, *_saved_threshold[1:])
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0 and _saved_threshold is not None:
                gc.set_threshold(*_saved_threshold)
                gc.unfreeze()
                _saved_threshold = None
