"""How a notebook shares the CPU with the other programs on a student's laptop.

PyTorch runs its CPU operations on an OpenMP thread team, one thread per core, whose idle
threads spin-wait by default. Beside one other busy program (a browser tab, a video call, a
second kernel) a spinning team fights it for every core, and training ran 10-20x slower here.
With OpenMP's passive wait policy idle threads sleep, and a busy neighbour costs only its share.

OpenMP reads its environment once, when ``import torch`` loads it, so the policy must be in the
environment before that. Every notebook's first cell imports ``helpers`` before torch; importing
``helpers`` imports this module first, which sets the policy (unless the environment names one).
That holds however the kernel was started (JupyterLab, ``jupyter notebook``, VS Code, conda).
If torch was loaded before ``helpers`` (a cell run out of order, a reordered import), the team
can no longer be made to sleep; in a notebook's kernel torch is then limited to one thread, which
no neighbour can stall, and a one-line notice says why (a script or test is left as it is).
"""

from __future__ import annotations

import os
import sys

from .core.contract import WAIT_POLICY, WAIT_POLICY_ENV

__all__ = ["threading_policy", "WAIT_POLICY", "WAIT_POLICY_ENV"]


def _choose() -> str:
    if "torch" not in sys.modules:
        os.environ.setdefault(WAIT_POLICY_ENV, WAIT_POLICY)  # a policy the user set is kept
        return "passive" if os.environ[WAIT_POLICY_ENV].upper() == WAIT_POLICY else "as set by the environment"
    if os.environ.get(WAIT_POLICY_ENV, "").upper() == WAIT_POLICY:
        return "passive"  # set before torch loaded, by the grader or by the user
    if "ipykernel" not in sys.modules:
        return "as torch set it"  # a script or a test run: its author chose the threads
    import torch

    torch.set_num_threads(1)
    print("helpers: torch was imported before helpers, so its threads would spin-wait and slow down beside "
          "other programs; using one thread. Import helpers first (restart the kernel) to use every core.")
    return "one thread"


_POLICY = _choose()


def threading_policy() -> str:
    """How this kernel's torch threads wait: ``"passive"`` (they sleep when idle; the usual case),
    ``"one thread"`` (torch was loaded before helpers in a notebook's kernel), ``"as torch set it"``
    (the same in a script or a test), or ``"as set by the environment"``."""
    return _POLICY
