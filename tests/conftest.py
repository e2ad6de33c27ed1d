"""What every test run shares: a hang after the last test fails the run instead of CI."""

from __future__ import annotations

import faulthandler
import sys

import pytest

# Interpreter exit waits for every executor still open and for the threads of process pools;
# a thread that can never end would hang it, after every test has passed and with no
# pytest-timeout left to stop it. Past this many seconds, every thread's stack is printed
# and the run exits with status 1.
EXIT_TIMEOUT = 120


def pytest_unconfigure(config: pytest.Config) -> None:
    faulthandler.dump_traceback_later(EXIT_TIMEOUT, exit=True, file=sys.__stderr__)
