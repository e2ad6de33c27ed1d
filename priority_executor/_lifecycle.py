"""Interpreter exit and fork: the two moments when an executor is not shut down by its user.

At exit, every live executor is shut down and waited for, as ``ThreadPoolExecutor`` does:
queued and delayed one-shot tasks still run, recurring series are cancelled (an executor on a
ManualClock is shut down with ``cancel_futures``: its delayed tasks could never become due).
This happens when the interpreter runs its ``threading._register_atexit`` callbacks, before
``atexit``'s. The executor's threads are daemons: this wait is the one that exit makes, so a
Ctrl-C that stops it (having cancelled every task not started) lets the process end, as a
Ctrl-C stops ``ThreadPoolExecutor``'s. So does one that stops the wait of a ``shutdown()``
(see ``forget``).

In a forked child the parent's threads do not exist: each inherited executor is closed and
forgets them, so that neither its use nor the child's exit can wait on a thread that is gone.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol


class Scheduler(Protocol):
    """A scheduler, as exit and fork reach it."""

    manual_time: bool

    def shutdown(self, cancel_futures: bool, reason: str) -> None: ...
    def join(self) -> bool: ...
    def after_fork_in_child(self) -> None: ...


_live: weakref.WeakSet[Scheduler] = weakref.WeakSet()
_exiting = False
_ahead_of_process_pools = False


def register(scheduler: Scheduler) -> None:
    _live.add(scheduler)


def shutdown_reason() -> str:
    if _exiting:
        return "cannot schedule new futures after interpreter shutdown"
    return "cannot schedule new futures after shutdown"


def forget(scheduler: Scheduler) -> None:
    """A Ctrl-C stopped the wait for ``scheduler``: exit does not wait for it again."""
    _live.discard(scheduler)


def _at_exit() -> None:
    global _exiting
    _exiting = True
    waited: set[Scheduler] = set()
    try:
        # Again while tasks that ran at exit made executors of their own.
        while schedulers := [scheduler for scheduler in list(_live) if scheduler not in waited]:
            for scheduler in schedulers:
                # Waiting for a ManualClock that no one will advance would never end.
                scheduler.shutdown(scheduler.manual_time, shutdown_reason())
            for scheduler in schedulers:
                scheduler.join()
                waited.add(scheduler)
    except KeyboardInterrupt:
        # Ctrl-C: the user wants out. What has not started never will; the process ends
        # without waiting for what runs (daemon threads).
        for scheduler in list(_live):
            scheduler.shutdown(True, shutdown_reason())
        raise


def exit_before_process_pools() -> None:
    """Have the exit hook run before ``ProcessPoolExecutor``'s, which makes every process pool
    refuse work: the tasks that an executor still runs at exit may need its backend.

    Exit hooks run last registered first, and that pool registers its own when its module is
    first imported: registering ours again after that import puts it ahead.
    """
    global _ahead_of_process_pools
    if not _ahead_of_process_pools:
        import concurrent.futures.process  # noqa: F401 (registers its hook, if not yet)

        threading._register_atexit(_at_exit)  # type: ignore[attr-defined]
        _ahead_of_process_pools = True


def _after_fork_in_child() -> None:
    schedulers = list(_live)
    _live.clear()  # the child's exit is not theirs to wait for, nor their series to cancel
    for scheduler in schedulers:
        scheduler.after_fork_in_child()


threading._register_atexit(_at_exit)  # type: ignore[attr-defined]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
