"""Per-call options: what one call may give its tasks beyond ``submit()``'s four scheduling
keywords, without reserving another keyword that a callee might take (``timeout=`` must keep
reaching it, as requests-futures and many users pass it)::

    executor.options(...).submit(fetch, url, timeout=5)

``options()`` (see ``_submitting.Executor.options``) returns a view of the executor or lane
with the same ``submit()``, ``submit_recurring()`` and ``map()``: its tasks go where the
executor's (the lane's) go, each with these options.
"""

from __future__ import annotations


class Options:
    """The options of a view, checked when the view is made (so that a bad one raises at
    the ``options()`` call that gave it), and carried by each task submitted through it."""

    __slots__ = ("timings",)

    def __init__(self, *, timings: bool = False) -> None:
        self.timings = timings  # record each task's timings (see _events.timings)
