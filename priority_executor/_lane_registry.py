"""An executor's named lanes: one lane a name, kept for as long as its limits must hold."""

from __future__ import annotations

import threading
import weakref
from typing import Callable

from ._lane_engine import LaneState
from ._lanes import make_lane_state

_DEFAULTS = make_lane_state(None, None, None, None, None, None, None, False, None, None).settings()


class LaneRegistry:
    """Named lanes: every one while anything references it; those made with options also
    until their shutdown, so that their limits hold whoever looks them up. One made without
    has nothing to lose: once idle and unreferenced, it is gone. The names of those kept
    that were shut down stay taken: a lookup without options must not make a lane without
    the limits of the one it names."""

    def __init__(self) -> None:
        self._named: weakref.WeakValueDictionary[str, LaneState] = weakref.WeakValueDictionary()
        self._kept: dict[str, LaneState] = {}
        self._shut: set[str] = set()
        self._lock = threading.Lock()

    def lane(
        self, state: LaneState, rates_given: bool, made: Callable[[LaneState], None]
    ) -> LaneState:
        """The lane of ``state``'s name: ``state`` itself if there is none (``made(state)``
        is called before any other thread can find it), else the live one, whose options
        must agree with those given. ``rates_given``: whether the call gave ``rates``."""
        name = state.name
        given = state.settings()
        if not rates_given:
            # Made of max_starts and per, each compared on its own: per left out is no
            # claim on the lane's.
            given["rates"] = _DEFAULTS["rates"]
        with self._lock:
            live = self._named.get(name)  # type: ignore[arg-type]  # named: see lane()
            if live is not None and not live.closed:
                for option, value in live.settings().items():
                    if given[option] != _DEFAULTS[option] and given[option] != value:
                        raise ValueError(
                            f"lane {name!r} has {option}={value!r}, not {given[option]!r}: a"
                            " named lane keeps the options it was made with"
                        )
                return live
            if name in self._shut:
                if given == _DEFAULTS:
                    raise RuntimeError(
                        f"lane {name!r} was shut down, and its limits with it: give"
                        " options to make a new lane of that name"
                    )
                self._shut.remove(name)
            made(state)
            self._named[name] = state  # type: ignore[index]
            if given != _DEFAULTS:
                self._kept[name] = state  # type: ignore[index]
            return state

    def live(self) -> list[LaneState]:
        with self._lock:
            return [state for state in self._named.values() if not state.closed]

    def configured(self, state: LaneState) -> None:
        """A lane was configured: a named one given options keeps them (see ``lane()``)."""
        with self._lock:
            if (
                state.name is not None
                and not state.closed
                and self._named.get(state.name) is state
                and state.settings() != _DEFAULTS
            ):
                self._kept[state.name] = state

    def shut(self, state: LaneState) -> None:
        """A lane was shut down: a kept one is let go, its name stays taken."""
        with self._lock:
            if state.name is not None and self._kept.get(state.name) is state:
                del self._kept[state.name]
                self._shut.add(state.name)
