"""Progress bars for long loops that leave a one-line summary, not a frozen bar, in the notebook.

A Jupyter progress widget is saved with the text of its *first* frame ("0%|      | 0/20"), and
that text is what a PDF export or a notebook opened elsewhere shows. Here the widget's output is
replaced, when the loop ends, by a line that says what ran and how long it took.
"""

from __future__ import annotations

import time
from typing import Iterable, Iterator, TypeVar

from tqdm import tqdm as text_tqdm

from .cpu import share_cores

__all__ = ["progress"]

T = TypeVar("T")


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
        import ipywidgets  # noqa: F401  (the widget bar needs it)
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress(iterable: Iterable[T], desc: str, total: int | None = None) -> Iterator[T]:
    """Iterate over ``iterable`` with a progress bar labelled ``desc``.

    In a notebook the bar is a widget that turns into ``"<desc>: <n> steps in <s> s"`` when the
    loop ends; elsewhere it is tqdm's text bar, cleared at the end. Use it directly in a ``for``
    loop: the summary is written when the generator finishes or is closed (a ``break`` closes it
    as soon as the loop lets go of it). At each step torch's thread count follows the load of the
    other programs on the machine (:func:`helpers.cpu.share_cores`).
    """
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    if not _in_notebook():
        for item in text_tqdm(iterable, desc=desc, total=total, leave=False):
            share_cores()
            yield item
        return
    from IPython.display import display
    from tqdm.notebook import tqdm as widget_tqdm

    started, steps = time.perf_counter(), 0
    bar = widget_tqdm(iterable, desc=desc, total=total, leave=False, display=False)
    handle = display(bar.container, display_id=True)
    try:
        for item in bar:
            steps += 1
            share_cores()  # torch's threads follow the other programs' load (helpers.cpu)
            yield item
    finally:
        bar.close()
        summary = f"{desc}: {steps} step{'s' * (steps != 1)} in {time.perf_counter() - started:.1f} s"
        handle.update({"text/plain": summary}, raw=True)
