"""Run untrusted plugin code (strategies, interceptors) with a time limit, without I/O."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from .errors import ContextShiftError

T = TypeVar("T")


class PluginFailed(ContextShiftError):
    """A plugin raised, timed out or returned the wrong thing; the message never repeats its internals."""

    code = "PLUGIN_FAILED"


def call_with_timeout(function: Callable[[], T], timeout: float, *, name: str = "contextshift-plugin") -> T:
    """``function()`` in a daemon thread; :class:`PluginFailed` if it raises or outlives ``timeout`` seconds.

    A plugin that hangs is abandoned, not killed: its thread is a daemon and its result is ignored.
    """
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["result"] = function()
        except BaseException as error:  # a plugin's failure is reported, never raised through the host
            box["error"] = error

    worker = threading.Thread(target=target, name=name, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise PluginFailed(f"timed out after {timeout:g} s")
    if "error" in box:
        raise PluginFailed(f"raised {type(box['error']).__name__}")
    return box["result"]  # type: ignore[return-value]
