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

__all__ = ["cap_to_cpus", "exit_with_parent", "usable_cpus", "workers_die_with_parent"]

_WATCHDOG: threading.Thread | None = None


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, else the core count)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # macOS, Windows
        return max(os.cpu_count() or 1, 1)


def _cpu_times(path: str = "/proc/stat") -> tuple[int, int] | None:
    """(idle, total) jiffies of all CPUs from the first line of ``/proc/stat``; None where there is none (not Linux)."""
    try:
        with open(path) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 5 or fields[0] != "cpu":
        return None
    ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal (guest is inside user)
    return ticks[3] + ticks[4], sum(ticks)


def idle_cpus(seconds: float = 0.2, path: str = "/proc/stat") -> float | None:
    """How many CPUs were idle, on average, over the next ``seconds`` (from ``/proc/stat``); None where unknown.

    A sample of now, unlike the one-minute load average, which still counts work that has just ended
    (the previous cell of a grid run in this process) for a minute after.
    """
    import time

    first = _cpu_times(path)
    if first is None:
        return None
    time.sleep(seconds)
    second = _cpu_times(path)
    if second is None or second[1] <= first[1]:
        return None
    return (os.cpu_count() or 1) * (second[0] - first[0]) / (second[1] - first[1])


def cap_to_cpus(n: int, name: str) -> tuple[int, str | None]:
    """``n`` processes or threads capped to :func:`usable_cpus`, and a one-line notice where it was capped.

    More workers than CPUs only queue for the same cores (and each loky worker is a whole Python
    process: 100,000 of them exhaust memory and process limits before any work is done).
    """
    cpus = usable_cpus()
    if n <= cpus:
        return n, None
    return cpus, f"{name} {n} capped to {cpus}, the CPUs this process may use"


def exit_with_parent(parent_pid: int | None, interval: float = 0.5) -> None:
    """In a worker process: exit (code 70) when ``parent_pid`` is no longer its parent; idempotent.

    A worker whose parent died while it was still starting (importing, before this initializer
    ran) has already been re-parented: it exits at once instead of waiting for work forever.
    """
    global _WATCHDOG
    if parent_pid is None or _WATCHDOG is not None or os.getpid() == parent_pid:
        return
    if os.getppid() != parent_pid:
        os._exit(70)

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
