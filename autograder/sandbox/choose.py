"""The choice of seal: bubblewrap where it starts, else POSIX separation when the grader is root.

:mod:`autograder.sandbox.seal` holds what both seals share (the limits and the run loop);
:mod:`autograder.sandbox.bubblewrap` and :mod:`autograder.sandbox.posix` build on it; this module picks
one for the machine, checked by starting it, and gives a root grader's seal its pool of uids.
"""

from __future__ import annotations

import os
from pathlib import Path

from autograder.sandbox.bubblewrap import BubblewrapSeal
from autograder.sandbox.posix import PosixSeal
from autograder.sandbox.seal import Seal, SandboxUnavailable
from autograder.sandbox.uids import UidError, UidPool

#: ``auto`` (bubblewrap where it starts, else POSIX separation as root), ``bubblewrap`` or ``posix``.
SANDBOX_MODE_ENV = "COURSE_SANDBOX"
SANDBOX_MODES = ("auto", "bubblewrap", "posix")


def open_seal(staging: Path, python: Path, mode: str | None = None, jobs: int = 1) -> Seal:
    """The sandbox for this machine, checked by starting one: bubblewrap where it starts (``auto``),
    else POSIX separation when the grader is root. ``mode`` (default ``$COURSE_SANDBOX`` or
    ``auto``) forces one. A root grader's sandbox gets a pool of uids (``close_seal`` frees
    them). Raises SandboxUnavailable with what to do."""
    mode = mode or os.environ.get(SANDBOX_MODE_ENV) or "auto"
    if mode not in SANDBOX_MODES:
        raise SandboxUnavailable(f"{SANDBOX_MODE_ENV}={mode!r}: expected one of {', '.join(SANDBOX_MODES)}")
    failures = []
    kinds = ([BubblewrapSeal] if mode in ("auto", "bubblewrap") else []) + ([PosixSeal] if mode in ("auto", "posix") else [])
    for kind in kinds:
        try:  # a root grader's runs each get a fresh uid: two a job, as a uid is emptied after its run
            pool = UidPool(2 * max(1, jobs), kind.host_places()) if os.geteuid() == 0 else None
        except (UidError, OSError) as err:
            raise SandboxUnavailable(str(err)) from None
        try:
            sandbox = kind(python=python, staging=staging, uids=pool)
            sandbox.probe()
            return sandbox
        except SandboxUnavailable as err:
            failures.append(str(err))
            if pool is not None:
                pool.close()
    raise SandboxUnavailable("; and ".join(failures))


def close_seal(sandbox: Seal | None) -> None:
    """Free the uids a sandbox holds, for other graders."""
    if sandbox is not None and sandbox.uids is not None:
        sandbox.uids.close()
