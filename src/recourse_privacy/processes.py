"""Worker processes that die with their parent: no orphan keeps computing after a ``kill -9``.

joblib's loky workers outlive a parent killed by ``SIGKILL`` (they wait for work until their
idle timeout). :func:`workers_die_with_parent` makes every loky worker started inside it run
:func:`exit_with_parent` first: a daemon thread that exits the worker as soon as its parent
process is gone. Interrupts (Ctrl-C, ``SIGTERM``) are handled by the CLI, which also stops the
workers on its way out.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

__all__ = ["exit_with_parent", "workers_die_with_parent"]

_WATCHDOG: threading.Thread | None = None


def exit_with_parent(parent_pid: int | None, interval: float = 0.5) -> None:
    """In a worker process: exit (code 70) when ``parent_pid`` is no longer its parent; idempotent."""
    global _WATCHDOG
    if parent_pid is None or _WATCHDOG is not None or os.getpid() == parent_pid or os.getppid() != parent_pid:
        return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(70)

    _WATCHDOG = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    _WATCHDOG.start()


@contextlib.contextmanager
def workers_die_with_parent():
    """Within this block, joblib's loky workers watch this process and exit when it dies."""
    from joblib import parallel_config
    from joblib._parallel_backends import LokyBackend

    with parallel_config(backend=LokyBackend(initializer=exit_with_parent, initargs=(os.getpid(),))):
        yield
