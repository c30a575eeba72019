"""How a notebook shares the CPU with the other programs on a student's laptop.

PyTorch runs its CPU operations on an OpenMP thread team, one thread per core, whose idle
threads spin-wait. On an idle machine spinning is the fastest way to wait. Beside one other busy
program (a browser tab, a video call, a second kernel) a full team fights it for every core, and
training ran 10-20x slower here. OpenMP's passive policy (idle threads sleep) fixes the busy case
but made an idle machine 1.4-1.9x slower (``benchmarks/threads.py``).

So a notebook's kernel keeps torch's default waiting and follows the load instead. The long loops
(:func:`helpers.progress`, which every training and timing loop goes through) call
:func:`share_cores` at each step, and the kernel calls it before each cell (for a student's own
loop). Every half second or more it measures how much CPU the *other* programs used and gives
torch one thread fewer per busy program (at least one). A team no larger than the free cores never
waits for a thread the neighbour pushed off its core. The thread count changes only between steps,
from the kernel's main thread, where torch allows it.

This works however the kernel was started (JupyterLab, ``jupyter notebook``, VS Code, conda) and in
whatever order the imports ran, since it sets nothing before torch loads. Elsewhere:
- a wait policy named in the environment is kept and the threads stay as they are (the grader and
  the build set ``OMP_WAIT_POLICY=PASSIVE``, so a grade never depends on the load);
- a script or a test that imports ``helpers`` before torch gets the passive policy, and its threads
  stay as they are (its figures should not depend on what else ran).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import Counter

from .core.contract import WAIT_POLICY, WAIT_POLICY_ENV

__all__ = ["threading_policy", "share_cores", "follow_the_load", "thread_choices", "threads_for", "WAIT_POLICY",
           "WAIT_POLICY_ENV"]

#: Seconds between two measurements of the load: long enough to read it (the clocks tick every
#: 10 ms), short enough that a neighbour that starts costs at most a moment of spinning.
INTERVAL = 0.5
#: Other programs' CPU use, in cores, that counts as one busy program: a browser at rest or a
#: terminal uses far less; a neighbour pushed off a spinning team gets about 2/3 of a core.
ONE_PROGRAM = 0.5


def _choose() -> str:
    if WAIT_POLICY_ENV in os.environ:  # the grader, the build, a benchmark's baseline or the user chose
        return "passive" if os.environ[WAIT_POLICY_ENV].upper() == WAIT_POLICY else "as set by the environment"
    if "ipykernel" in sys.modules:
        return "adaptive"
    if "torch" not in sys.modules:
        os.environ[WAIT_POLICY_ENV] = WAIT_POLICY
        return "passive"
    return "as torch set it"  # a script or a test run that loaded torch first: its author chose


_POLICY = _choose()


def threading_policy() -> str:
    """How this kernel's torch threads share the CPU: ``"adaptive"`` (a notebook's kernel: torch's
    default waiting, one thread fewer per other busy program; see :func:`share_cores`),
    ``"passive"`` (idle threads sleep: the grader, the build, scripts and tests), ``"as set by the
    environment"`` or ``"as torch set it"``."""
    return _POLICY


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def threads_for(others: float, cores: int) -> int:
    """Torch threads for a machine with ``cores`` cores whose other programs use ``others`` cores:
    one fewer per busy program (``others`` rounded, with :data:`ONE_PROGRAM` counting as one), at
    least one."""
    if others < 0 or cores < 1:
        raise ValueError(f"others must be >= 0 and cores >= 1, got others={others!r}, cores={cores!r}")
    busy_programs = math.floor(others + (1 - ONE_PROGRAM))
    return max(1, min(cores, cores - busy_programs))


class _LoadFollower:
    """Measures the other programs' CPU use between two calls and sets torch's threads to match."""

    def __init__(self):
        self.cores = _cores()
        # (wall, every program's busy CPU seconds, this process's CPU seconds), from now: the first
        # cell after ``import helpers`` already starts with the threads the load allows
        self.last = self._reading()
        self.choices = Counter()  # threads chosen -> how many measurements chose them

    @staticmethod
    def _reading():
        import psutil

        times = psutil.cpu_times()
        busy = sum(times) - times.idle - getattr(times, "iowait", 0.0)
        return time.monotonic(), busy, time.process_time()

    def step(self) -> int | None:
        if time.monotonic() - self.last[0] < INTERVAL:
            return None
        reading = self._reading()
        last, self.last = self.last, reading
        wall, busy, own = (b - a for a, b in zip(last, reading))
        others = max(0.0, (busy - own) / wall)
        import torch

        threads = threads_for(others, self.cores)
        self.choices[threads] += 1
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        return threads


_FOLLOWER = _LoadFollower() if _POLICY == "adaptive" else None


def _before_each_cell(*_info) -> None:
    share_cores()


if _FOLLOWER is not None:  # a cell's own loop (a student's training loop) starts with the threads the load allows
    from IPython import get_ipython

    if get_ipython() is not None:
        get_ipython().events.register("pre_run_cell", _before_each_cell)


def follow_the_load() -> None:
    """Make this process follow the load as a notebook's kernel does (a script or a benchmark that
    wants the notebooks' behaviour); it keeps whatever wait policy torch loaded with."""
    global _FOLLOWER, _POLICY
    if _FOLLOWER is None:
        _FOLLOWER, _POLICY = _LoadFollower(), "adaptive"


def thread_choices() -> dict[int, int]:
    """How many of this kernel's load measurements chose each thread count (empty when the kernel
    does not follow the load): on an idle machine every one should be the number of cores."""
    return dict(sorted(_FOLLOWER.choices.items())) if _FOLLOWER is not None else {}


def share_cores() -> int | None:
    """In a notebook's kernel, at most every :data:`INTERVAL` seconds: give torch one thread per core
    the other programs leave free (:func:`threads_for`) and return that count; else ``None``. Call it
    from the kernel's main thread between steps of a long loop (``helpers.progress`` does)."""
    if _FOLLOWER is None:
        return None
    return _FOLLOWER.step()
