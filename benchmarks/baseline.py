"""``--baseline REV``: PriorityExecutor as it was at an earlier git revision, as one more pool.

The package's files at REV are exported (``git archive``) into a temporary directory under a
name of their own, ``priority_executor_at_<commit>``, and imported from there beside the
current ``priority_executor``. Its modules import each other relatively; a ``from
priority_executor import`` (the ``python -m`` demo has one) is rewritten to import the copy,
so that nothing of the current package leaks into the baseline.

The pool, named ``PE@REV``, joins the contenders for immediate work (measures 1 to 3), and
those of measure 11 if REV has lanes, in the same process, interleaved with them in every
repetition like any other contender.
"""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from benchmarks.pools import BASELINES, Pool

REPOSITORY = Path(__file__).resolve().parent.parent
PACKAGE = "priority_executor"
ABSOLUTE_IMPORT = re.compile(rf"^(\s*from\s+){PACKAGE}\b", re.MULTILINE)


@contextmanager
def compared(revision: str) -> Iterator[str]:
    """Add PE at ``revision`` to the pools while the block runs; give the commit it names.

    Raises ValueError when git does not know ``revision`` or the package did not exist then.
    """
    commit = git("rev-parse", "--verify", "--end-of-options", f"{revision}^{{commit}}").decode()
    commit = commit.strip()
    name = f"{PACKAGE}_at_{commit[:12]}"
    archive = git("archive", "--format=zip", f"--prefix={name}/", f"{commit}:{PACKAGE}")
    with tempfile.TemporaryDirectory(prefix="pe-baseline-") as directory:
        zipfile.ZipFile(io.BytesIO(archive)).extractall(directory)
        for module in Path(directory, name).glob("**/*.py"):
            source = module.read_text(encoding="utf-8")
            module.write_text(ABSOLUTE_IMPORT.sub(rf"\g<1>{name}", source), encoding="utf-8")
        sys.path.insert(0, directory)
        pool = Pool(f"PE@{revision}", factory(importlib.import_module(name).PriorityExecutor))
        BASELINES.append(pool)
        try:
            yield commit
        finally:
            BASELINES.remove(pool)
            sys.path.remove(directory)


def factory(executor_class: Callable[..., Executor]) -> Callable[[int], Executor]:
    """A pool's ``make`` for ``executor_class``: takes ``max_workers``, as the other pools do."""

    def make(max_workers: int) -> Executor:
        executor: Executor = executor_class(max_workers=max_workers)
        return executor

    return make


def git(*arguments: str) -> bytes:
    """The output of ``git ARGUMENTS`` in this repository; ValueError with git's message."""
    try:
        done = subprocess.run(["git", *arguments], cwd=REPOSITORY, capture_output=True, check=True)
    except subprocess.CalledProcessError as exc:
        message = exc.stderr.decode(errors="replace").strip()
        raise ValueError(f"git {arguments[0]} failed: {message}") from None
    return done.stdout
