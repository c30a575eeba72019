"""Student-facing library shared by every notebook: data, models, plots and grading primitives.

It holds what students should not have to write; it never holds a solution.

The names below load on first use (``helpers.plot_attention``, ``from helpers import seed_everything``), so that
importing a part alone (``helpers.core.contract``, as the grader does) does not load torch and
matplotlib with it.
"""

import importlib
import importlib.util

# First, before anything loads torch: how its threads share the CPU (see helpers.cpu).
from .cpu import threading_policy  # noqa: I001
from .check_messages import say_check_messages_once
from .progress import progress  # loaded now (it is light): the function, not its module, is helpers.progress

say_check_messages_once()  # otter is loaded by then: the notebook's first cell imports it

#: The names loaded on first use, each with the module that defines it.
_HOMES = {
    "seed_everything": ".runtime", "get_device": ".runtime", "budget": ".runtime", "use_setting": ".runtime",
    "setting": ".runtime", "fast_mode": ".runtime",
    "expect": ".core.golden", "expect_between": ".core.golden", "expect_arguments_unchanged": ".core.golden",
    "GoldenMismatch": ".core.golden",
    "plot_attention": ".plots",
    "check_tensor": ".validation",
    "export_submission": ".submission",
}

__all__ = [*_HOMES, "progress"]


def __getattr__(name: str):
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")  # a part, as ``helpers.plots`` was once imported
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
