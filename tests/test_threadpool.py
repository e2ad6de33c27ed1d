"""A ``ThreadPoolExecutor`` wherever one is expected: ``isinstance``, asyncio's default
executor, a grpc server, Python 3.14's ``map(buffersize=)``."""

from __future__ import annotations

import asyncio
import gc
import itertools
import threading
import warnings
import weakref
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures.thread import BrokenThreadPool
from typing import Any, Callable

import pytest
from helpers import TIMEOUT, wait_until

from priority_executor import Lane, PriorityExecutor

# -- a ThreadPoolExecutor -----------------------------------------------------------------------


def test_it_is_a_thread_pool_executor_and_a_lane_a_plain_executor() -> None:
    with PriorityExecutor(1) as ex:
        assert isinstance(ex, ThreadPoolExecutor)
        assert isinstance(ex, Executor)
        lane = ex.lane()
        assert isinstance(lane, Executor)
        assert not isinstance(lane, ThreadPoolExecutor)


def test_no_method_of_thread_pool_executor_reaches_its_machinery() -> None:
    """ThreadPoolExecutor.__init__ is never called: each of its methods is replaced, but for
    the class-level hook that uses no instance state (prepare_context, Python 3.14)."""
    inherited = {
        name
        for name, value in vars(ThreadPoolExecutor).items()
        if callable(value) or isinstance(value, (classmethod, staticmethod))
        if getattr(PriorityExecutor, name) is getattr(ThreadPoolExecutor, name)
    }
    assert inherited <= {"prepare_context"}, inherited


def test_the_private_attributes_that_clients_read() -> None:
    with PriorityExecutor(3, thread_name_prefix="pool") as ex:
        assert ex._max_workers == 3
        assert ex._thread_name_prefix == "pool"
        assert PriorityExecutor.BROKEN is BrokenThreadPool
        assert ex._work_queue.empty()  # drained as its queue is: see test_work_queue.py


def test_thread_pool_executors_hooks_keep_the_executor_working() -> None:
    with PriorityExecutor(2) as ex:
        ex._adjust_thread_count()  # threads start as work comes: nothing to do
        assert ex.submit(pow, 2, 5).result(timeout=TIMEOUT) == 32


def test_initializer_failed_breaks_the_pool_as_thread_pool_executors_does() -> None:
    ex = PriorityExecutor(1)
    waiting = ex.submit(pow, 2, 5, delay=60)
    ex._initializer_failed()
    with pytest.raises(BrokenThreadPool):
        waiting.result(timeout=TIMEOUT)
    with pytest.raises(BrokenThreadPool):
        ex.submit(pow, 2, 5)
    ex.shutdown()


# -- asyncio's default executor -----------------------------------------------------------------


def test_asyncio_default_executor_runs_to_thread_and_run_in_executor() -> None:
    async def main(ex: PriorityExecutor) -> tuple[str, str, int]:
        loop = asyncio.get_running_loop()
        with warnings.catch_warnings():
            # Python 3.9 and 3.10 warn of anything that is not a ThreadPoolExecutor.
            warnings.simplefilter("error")
            loop.set_default_executor(ex)
        name = await asyncio.to_thread(lambda: threading.current_thread().name)
        other = await loop.run_in_executor(None, lambda: threading.current_thread().name)
        total = await loop.run_in_executor(None, sum, [1, 2, 3])
        await loop.shutdown_default_executor()
        return name, other, total

    ex = PriorityExecutor(2, thread_name_prefix="loop-pool")
    name, other, total = asyncio.run(main(ex))
    assert name.startswith("loop-pool_") and other.startswith("loop-pool_")
    assert total == 6
    with pytest.raises(RuntimeError, match="shutdown"):
        ex.submit(print)


def test_asyncio_run_shuts_the_default_executor_down_at_its_end() -> None:
    ex = PriorityExecutor(1)

    async def main() -> int:
        asyncio.get_running_loop().set_default_executor(ex)
        return await asyncio.to_thread(pow, 2, 10)

    assert asyncio.run(main()) == 1024
    with pytest.raises(RuntimeError, match="shutdown"):
        ex.submit(print)


# -- a grpc server ------------------------------------------------------------------------------


def test_a_grpc_server_on_loopback_serves_its_calls_on_the_executor() -> None:
    grpc = pytest.importorskip("grpc", reason="grpcio is not installed: pip install '.[test]'")
    threads: list[str] = []

    def echo(request: bytes, context: Any) -> bytes:
        threads.append(threading.current_thread().name)
        return request.upper()

    handler = grpc.method_handlers_generic_handler(
        "test.Echo", {"Say": grpc.unary_unary_rpc_method_handler(echo)}
    )
    with PriorityExecutor(2, thread_name_prefix="grpc-pool") as ex:
        server = grpc.server(ex, handlers=[handler])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                say = channel.unary_unary("/test.Echo/Say")
                replies = [say(f"hello {i}".encode(), timeout=TIMEOUT) for i in range(5)]
        finally:
            server.stop(None).wait(TIMEOUT)
    assert replies == [f"HELLO {i}".encode() for i in range(5)]
    assert threads and all(name.startswith("grpc-pool_") for name in threads)


# -- map(buffersize=): CPython 3.14's test_map_buffersize* tests, on an executor and a lane ------


@pytest.fixture(params=["executor", "lane"])
def executor(request: pytest.FixtureRequest) -> Any:
    with PriorityExecutor(2) as ex:
        yield ex if request.param == "executor" else ex.lane(max_running=2)


def add(x: int, y: int) -> int:
    return x + y


@pytest.mark.parametrize("buffersize", ["foo", 2.0])
def test_map_buffersize_type_validation(executor: PriorityExecutor | Lane, buffersize: Any) -> None:
    with pytest.raises(TypeError, match="buffersize must be an integer or None"):
        executor.map(str, range(4), buffersize=buffersize)


@pytest.mark.parametrize("buffersize", [0, -1])
def test_map_buffersize_value_validation(
    executor: PriorityExecutor | Lane, buffersize: int
) -> None:
    with pytest.raises(ValueError, match=r"buffersize must be None or > 0"):
        executor.map(str, range(4), buffersize=buffersize)


@pytest.mark.parametrize("buffersize", [1, 2, 4, 8])
def test_map_buffersize(executor: PriorityExecutor | Lane, buffersize: int) -> None:
    assert list(executor.map(str, range(4), buffersize=buffersize)) == ["0", "1", "2", "3"]


@pytest.mark.parametrize("buffersize", [1, 2, 4, 8])
def test_map_buffersize_on_multiple_iterables(
    executor: PriorityExecutor | Lane, buffersize: int
) -> None:
    ints = range(4)
    assert list(executor.map(add, ints, ints, buffersize=buffersize)) == [0, 2, 4, 6]


def test_map_buffersize_on_infinite_iterable(executor: PriorityExecutor | Lane) -> None:
    res = executor.map(str, itertools.count(), buffersize=2)
    assert [next(res, None) for _ in range(3)] == ["0", "1", "2"]


def test_map_buffersize_on_multiple_infinite_iterables(executor: PriorityExecutor | Lane) -> None:
    res = executor.map(add, itertools.count(), itertools.count(), buffersize=2)
    assert [next(res, None) for _ in range(3)] == [0, 2, 4]


def test_map_buffersize_on_empty_iterable(executor: PriorityExecutor | Lane) -> None:
    assert next(executor.map(str, [], buffersize=2), None) is None


def test_map_buffersize_without_iterable(executor: PriorityExecutor | Lane) -> None:
    assert next(executor.map(str, buffersize=2), None) is None  # type: ignore[call-overload]


def test_map_buffersize_when_buffer_is_full(executor: PriorityExecutor | Lane) -> None:
    ints = iter(range(4))
    executor.map(str, ints, buffersize=2)
    executor.shutdown(wait=True)  # wait for tasks to complete
    assert next(ints) == 2, "should have fetched only `buffersize` elements from `ints`"


# -- map(buffersize=): what the port does not show ----------------------------------------------


def test_map_buffersize_reads_one_more_input_per_result_taken(
    executor: PriorityExecutor | Lane,
) -> None:
    read: list[int] = []

    def inputs() -> Any:
        for i in itertools.count():
            read.append(i)
            yield i

    results = executor.map(str, inputs(), buffersize=3)
    assert read == [0, 1, 2]
    assert next(results) == "0"
    assert read == [0, 1, 2, 3]
    results.close()  # type: ignore[attr-defined]


def test_map_buffersize_refills_through_the_instances_own_submit(
    executor: PriorityExecutor | Lane,
) -> None:
    """As tqdm's thread_map does: it replaces submit() on the instance."""
    submitted: list[tuple[Any, ...]] = []
    submit = executor.submit

    def counting_submit(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        submitted.append(args)
        return submit(fn, *args, **kwargs)

    executor.submit = counting_submit  # type: ignore[method-assign, assignment]
    assert list(executor.map(str, range(5), buffersize=2)) == ["0", "1", "2", "3", "4"]
    assert submitted == [(i,) for i in range(5)]


def test_map_buffersize_passes_a_priority_given_to_each_refill(
    executor: PriorityExecutor | Lane,
) -> None:
    priorities: list[Any] = []
    submit = executor.submit

    def recording_submit(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        priorities.append(kwargs.get("priority"))
        return submit(fn, *args, **kwargs)

    executor.submit = recording_submit  # type: ignore[method-assign, assignment]
    assert list(executor.map(str, range(3), buffersize=1, priority=5)) == ["0", "1", "2"]
    assert priorities == [5, 5, 5]


@pytest.mark.parametrize("drop", ["close", "collect"])
def test_a_map_closed_or_collected_cancels_its_pending_calls(drop: str) -> None:
    release = threading.Event()

    def task(i: int) -> int:
        if i > 0:  # the one worker stays on 1 while the test looks at 2, 3 and 4
            release.wait(TIMEOUT)
        return i

    with PriorityExecutor(1) as ex:
        results = ex.map(task, itertools.count(), buffersize=4)
        assert next(results) == 0
        wait_until(lambda: ex.stats().running == 1, what="the worker to start task 1")
        waiting = [waiting_task.future for waiting_task in ex.waiting()]
        assert len(waiting) == 3  # 2, 3, and 4: one more read from the input as 0 was taken
        if drop == "close":
            results.close()  # type: ignore[attr-defined]
        else:
            del results
            gc.collect()
        assert all(future.cancelled() for future in waiting)
        assert ex.waiting() == []
        release.set()


def test_a_map_iterator_does_not_keep_its_executor_alive() -> None:
    ex = PriorityExecutor(1)
    results = ex.map(str, itertools.count(), buffersize=2)
    assert next(results) == "0"
    ref = weakref.ref(ex)
    ex.shutdown(wait=True)
    del ex
    gc.collect()
    assert ref() is None
    # The calls submitted before it went are still yielded; no more are submitted.
    assert list(results) == ["1", "2"]


def test_lane_map_takes_the_same_buffersize() -> None:
    with PriorityExecutor(2) as ex:
        lane: Lane = ex.lane(max_running=1)
        assert list(lane.map(str, itertools.islice(itertools.count(), 5), buffersize=2)) == [
            "0",
            "1",
            "2",
            "3",
            "4",
        ]
