"""Supervised background threads: the executor's own threads, which nothing may end early.

User code, done-callbacks and policies all run in these threads. ``Future`` catches only
``Exception`` from a callback, so a callback that raises ``SystemExit`` would otherwise end
the thread that completed the future, and with it every task that thread was to run. Such an
exception is logged as ``ThreadPoolExecutor`` logs an exception escaping its worker, and the
thread goes on.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

LOGGER = logging.getLogger("concurrent.futures")


class _Here(threading.local):
    # Class defaults: a thread that never set them reads them without an AttributeError
    # raised and caught, on every submit with max_waiting and every cancel().
    owner: object = None
    # The owners it acts for besides, outside ``owner``: a task of one executor that runs
    # a done-callback of another's future works for both (see acting_for).
    enclosing: tuple[object, ...] = ()


_here = _Here()


def start(name: str, owner: object, target: Callable[..., object], *args: Any) -> threading.Thread:
    """Start a thread of ``owner`` that runs ``target(*args)``.

    Raises what ``Thread.start()`` raises (no thread is left behind then).
    """
    # A daemon: interpreter exit waits for the executor in its own hook (see _lifecycle),
    # which a Ctrl-C may stop, as it stops ThreadPoolExecutor's joins; the interpreter's
    # join of non-daemon threads could only be stopped by one more.
    thread = threading.Thread(name=name, target=_run_as, args=(owner, target, args), daemon=True)
    thread.start()
    return thread


def _run_as(owner: object, target: Callable[..., object], args: tuple[Any, ...]) -> None:
    # Set by the thread itself before it runs anything: so it knows itself as the owner's
    # even before whoever started it has listed it.
    _here.owner = owner
    target(*args)


def serve(loop: Callable[..., object], *args: Any) -> None:
    """Run ``loop(*args)`` until it returns, logging and restarting it if it raises."""
    while True:
        try:
            loop(*args)
            return
        except BaseException:
            LOGGER.critical("Exception in worker", exc_info=True)


class acting_for:
    """For the ``with`` block, the calling thread acts for ``owner`` too: it runs
    done-callbacks of ``owner``'s futures (see ``owned_by``). It still acts for whom it
    acted for before: a callback of one executor's future, run inside a task of another,
    is part of that task's work as well."""

    __slots__ = ("_outer", "_owner")

    def __init__(self, owner: object) -> None:
        self._owner = owner

    def __enter__(self) -> None:
        here = _here
        outer = self._outer = here.owner
        if outer is not None and outer is not self._owner:
            here.enclosing = (*here.enclosing, outer)
        here.owner = self._owner

    def __exit__(self, *exc_info: object) -> None:
        here = _here
        outer = self._outer
        if outer is not None and outer is not self._owner:
            here.enclosing = here.enclosing[:-1]
        here.owner = outer


def owned_by(owner: object) -> bool:
    """Whether the calling thread is one of ``owner``'s, or acts for it: a task or a
    done-callback of ``owner``'s, which cannot wait for the work it is part of."""
    here = _here
    return here.owner is owner or owner in here.enclosing
