"""Every limit of grading, in one place: what a submission's sandbox may use, what its runner may
send back, and what the intake reads of an upload.

``course grade``'s options, the Gradescope autograder, nbgrader's configuration and the
documentation's tables take their numbers from here; the runner inside the sandbox gets its caps
in its job file (:func:`runner_caps`), never from a copy of this module.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace


# ----------------------------------------------------------------------------- a sandbox's run
@dataclass(frozen=True)
class SandboxLimits:
    """What one submission's run may use (``course grade --timeout/--memory``)."""

    timeout: float = 300.0  # wall-clock seconds
    memory_mb: int = 4096  # processes' pages and everything held in memory, together
    processes: int = 64  # processes at once (threads: up to THREADS_PER_PROCESS per process)
    output_bytes: int = 1 << 20  # stdout + stderr kept; more is dropped
    disk_mb: int = 512  # every file the submission writes, together
    channel_bytes: int = 64 << 20  # result messages from the runner


#: The limits of ``course grade`` (unless its options say otherwise), of the Gradescope autograder
#: and of nbgrader's executions.
DEFAULT_LIMITS = SandboxLimits()

#: What the grader keeps for itself where one memory limit holds it and the submission together (a
#: Gradescope container): its own Python with torch for the judge (about 190 MB of its own memory,
#: measured; torch's library pages are shared with the kernel's), and what the meter's polling lets
#: a fast allocation overshoot by before the submission is stopped.
GRADER_ROOM_MB = 256


def limits_within(limits: SandboxLimits, allowed_mb: int | None) -> SandboxLimits:
    """``limits`` with the submission's memory cut to fit where the grader and the submission
    together may use ``allowed_mb`` (None: no such limit), the grader's room kept: past it the
    container's kernel kills a process, perhaps the grader, and no result is written."""
    if allowed_mb is None:
        return limits
    fits = max(allowed_mb // 2, allowed_mb - GRADER_ROOM_MB)
    return replace(limits, memory_mb=min(limits.memory_mb, fits))


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (a container's cpuset, a pinned share),
    else every core of the machine."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def threads_per_job(jobs: int) -> int:
    """Torch/OpenMP threads for each of ``jobs`` at once: the usable cores shared among them."""
    return max(1, usable_cores() // max(1, jobs))


def over_time(limits: SandboxLimits) -> str:
    """What a row says of a run stopped at the time limit."""
    return f"did not finish within {limits.timeout:g} s (an endless loop or a very slow cell?)"


#: Threads each process may run (RLIMIT_NPROC counts threads).
THREADS_PER_PROCESS = 8
#: Descriptors each process may hold open (RLIMIT_NOFILE): a kernel with torch and transformers holds
#: about 60; each descriptor is a socket whose queue can hold megabytes, or a file in flight.
OPEN_FILES = 256
#: Processes of a run that are the seal's own, beyond the limit: bwrap, its reaper and the lifeline watcher.
LAUNCHER_PROCESSES = 3
#: Tasks a run's control group may hold beyond its processes' threads: bwrap, its reaper, the launcher.
GROUP_TASK_SLACK = 16
#: A uid that owns more files than this in its folders is stopped (a scan of them must stay cheap).
MAX_FILES = 20_000
#: ... or folders nested deeper than this: the walk holds two descriptors a level, and a path past
#: PATH_MAX must not hide a file (the walk goes by descriptor, never by path).
MAX_DEPTH = 64


def address_space_backstop_mb(memory_mb: int) -> int:
    """Each process's RLIMIT_AS: never the memory limit itself (torch reserves address space per
    thread and maps weight files, which a 16-core machine multiplies), only a stop for absurd
    reservations: eight times the limit or the machine's memory, whichever is larger."""
    try:
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    except (ValueError, OSError):
        machine = 0
    return max(8 * memory_mb, machine)


# ----------------------------------------------------------------------------- what the runner sends
@dataclass(frozen=True)
class RunnerCaps:
    """Caps on what the runner passes on from the kernel. Measured on the seven reference solutions:
    the largest outbox line is 4.3 MiB (pretraining's span statistics, raw draws for the judge), the
    most in one run 11 MiB (autoencoders); the caps are about four times that, within the channel."""

    test_name_chars: int = 120  # a test name the kernel printed
    value_line_bytes: int = 16 << 20  # one collected value (an outbox line)
    values_bytes: int = 40 << 20  # every collected value of a run together
    notebook_chars: int = 48 << 20  # an executed notebook sent back (course pdf)
    # one sent back while grading, as the channel carries it (JSON-escaped): with every collected
    # value it stays within the channel, so keeping a notebook never costs a submission its grade
    graded_notebook_bytes: int = 16 << 20


RUNNER_CAPS = RunnerCaps()


def runner_caps() -> dict:
    """The caps as the job file hands them to the runner."""
    return asdict(RUNNER_CAPS)


# ----------------------------------------------------------------------------- an upload
#: The largest notebook the intake reads (a file, or the notebook inside a zip).
MAX_NOTEBOOK_BYTES = 100 << 20
#: Past this much inflated, a zip entry may not inflate more than MAX_COMPRESSION_RATIO times its
#: compressed size (real notebooks stay far below).
RATIO_FREE_BYTES = 16 << 20
MAX_COMPRESSION_RATIO = 200
