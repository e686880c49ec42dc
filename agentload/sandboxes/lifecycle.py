"""Sandboxes never outlive the process that made them.

Every open sandbox registers its ``close``. They run, in this order of likelihood:

* normally, from ``Sandbox.close()`` / the ``with`` block / a ``finally:``;
* on Ctrl-C, SIGTERM or SIGHUP: the handler installed here closes them all at once (so a tool
  call blocked in a worker thread ends now, not at its timeout, and ``asyncio.run`` can join its
  executor), then lets the signal do what it did before: ``KeyboardInterrupt`` or asyncio's
  cancellation for Ctrl-C, the default (the process ends with that signal) for the others;
* at exit, before worker threads are joined and again in ``atexit``: whatever is still open.

The SIGTERM/SIGHUP handlers are installed when ``agentload.sandboxes`` is first imported in the
main thread; the SIGINT one by the first sandbox opened in the main thread (or by calling
``install_signal_handlers()`` there). Sandboxes opened from worker threads inside ``asyncio.run``
rely on Ctrl-C's cancellation reaching the ``finally:`` that closes them.

What a ``kill -9`` leaves behind is labelled, and ``agentload sandbox cleanup`` removes it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["close_all", "install_signal_handlers", "register", "unregister"]

_lock = threading.RLock()  # re-entrant: a signal handler may interrupt a holder
_open: dict[str, Callable[[], None]] = {}
_atexit_done = False
_previous: dict[int, Any] = {}


def _forget_in_child() -> None:
    # a forked child (multiprocessing, a pre-fork server) must never remove its parent's sandboxes
    _open.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def register(key: str, close: Callable[[], None]) -> None:
    """Remember an open sandbox; installs the atexit hook and signal handlers on first use."""
    global _atexit_done
    with _lock:
        _open[key] = close
        if not _atexit_done:
            atexit.register(close_all)
            # Also before worker threads are joined at exit: a thread blocked in an exec (an
            # ``asyncio.to_thread`` tool call cut short by Ctrl-C) then ends at once, instead of
            # holding the exit until its command's timeout. The hooks run last-registered first.
            register_early = getattr(threading, "_register_atexit", None)
            if register_early is not None:
                with contextlib.suppress(RuntimeError):
                    register_early(close_all)
            _atexit_done = True
    install_signal_handlers()


def unregister(key: str) -> None:
    """Forget a sandbox that closed."""
    with _lock:
        _open.pop(key, None)


def close_all() -> None:
    """Close every sandbox still open (each close is attempted; errors are swallowed)."""
    with _lock:
        pending = list(_open.items())
        _open.clear()
    for _key, close in pending:
        with contextlib.suppress(Exception):
            close()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    close_all()
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
        return
    if previous == signal.SIG_IGN:
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_signal_handlers(*, sigint: bool = True) -> bool:
    """Close sandboxes on SIGTERM, SIGHUP and (``sigint``) SIGINT, then chain to the handler that
    was there before. Main thread only (``False`` elsewhere). Idempotent; if the program replaced
    our handler since, calling it again wraps the new one."""
    if threading.current_thread() is not threading.main_thread():
        return False
    wanted = (signal.SIGTERM, signal.SIGHUP, *((signal.SIGINT,) if sigint else ()))
    with _lock:
        for sig in wanted:
            current = signal.getsignal(sig)
            if current is _on_signal or current is None:  # ours already / set from C: leave it
                continue
            _previous[sig] = current
            signal.signal(sig, _on_signal)
    return True
