"""Details of the public API: how the process pool that the executor creates starts its
processes."""

from __future__ import annotations

import remote
from helpers import TIMEOUT

from priority_executor import PriorityExecutor


def test_an_owned_process_pool_does_not_fork() -> None:
    # A forked child would see this process' memory, as it is now; a child started by a
    # fork server or spawned imports the module afresh.
    remote.remember("set in the parent")
    try:
        with PriorityExecutor(1, backend="process") as ex:
            assert ex.submit(remote.remembered).result(TIMEOUT) is None
    finally:
        remote.remember(None)
