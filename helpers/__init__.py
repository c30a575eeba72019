"""Student-facing library shared by every notebook: data, models, plots and grading primitives.

It holds what students should not have to write; it never holds a solution.
"""

# First, before anything loads torch: how its threads share the CPU (see helpers.cpu).
from .cpu import threading_policy  # noqa: I001
from .core.golden import GoldenMismatch, expect, expect_arguments_unchanged, expect_between
from .plots import plot_attention
from .progress import progress
from .runtime import budget, fast_mode, get_device, seed_everything, setting, use_setting
from .submission import export_submission
from .validation import check_tensor
from .check_messages import say_check_messages_once

say_check_messages_once()  # otter is loaded by then: the notebook's first cell imports it

__all__ = [
    "seed_everything",
    "get_device",
    "budget",
    "use_setting",
    "setting",
    "fast_mode",
    "expect",
    "expect_between",
    "expect_arguments_unchanged",
    "GoldenMismatch",
    "plot_attention",
    "progress",
    "check_tensor",
    "export_submission",
]
