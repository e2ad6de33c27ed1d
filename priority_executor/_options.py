"""Per-call options: what one call may give its tasks beyond ``submit()``'s four scheduling
keywords, without reserving another keyword that a callee might take (``timeout=`` must keep
reaching it, as requests-futures and many users pass it)::

    executor.options(...).submit(fetch, url, timeout=5)

``options()`` (see ``_submitting.Executor.options``) returns a view of the executor or lane
with the same ``submit()``, ``submit_recurring()`` and ``map()``: its tasks go where the
executor's (the lane's) go, each with these options.
"""

from __future__ import annotations

import copy
from concurrent.futures import Future
from typing import Any


class Options:
    """The options of a view, checked when the view is made (so that a bad one raises at
    the ``options()`` call that gave it), and carried by each task submitted through it."""

    __slots__ = ("after", "after_any", "time_limit", "timings")

    def __init__(
        self,
        after: tuple[Future[Any], ...] = (),
        after_any: tuple[Future[Any], ...] = (),
        time_limit: float | None = None,
        timings: bool = False,
    ) -> None:
        # The futures its tasks wait for: each ends them unless it succeeded (after), or
        # whatever its outcome (after_any). See _dependencies.
        self.after = after
        self.after_any = after_any
        # Seconds each run of the task may take (see _runtime); None: its lane's, else its
        # executor's.
        self.time_limit = time_limit
        self.timings = timings  # record each task's timings (see _events.timings)

    def for_task(self) -> Options:
        """What a task keeps of these: all but its upstreams, which it waits for through
        an ``Upstreams`` of its own that lets go of each once done. Kept by a future (its
        task holds them), they would keep every upstream, and a chain's every future with
        its result, alive."""
        kept = copy.copy(self)
        kept.after = kept.after_any = ()
        return kept
