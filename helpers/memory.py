"""The largest tensor a function builds: how the kernel-attention and Performer checks see that
linear attention never holds a ``(Tq, Tk)`` matrix."""

from __future__ import annotations

from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode  # what torch.profiler and FlopCounterMode build on
from torch.utils._pytree import tree_leaves

__all__ = ["largest_intermediate"]


class _LargestTensor(TorchDispatchMode):
    """Records the largest tensor storage that any ATen operation allocates while active.

    Dispatch level, not Python level: the matrices an ``einsum`` or ``matmul`` builds inside one
    call are seen too. Storage, not shape: an ``expand``-ed view costs no memory.
    """

    def __init__(self):
        super().__init__()
        self.numel, self.shape = 0, ()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch would wrap __torch_dispatch__ so that a compiled function watched by this mode does not
        # trace into it, and the wrapper imports torch._dynamo on its first call (about 800 modules,
        # 1.1 s of every kernel_attention kernel). Without it a compiled function still runs under the
        # watcher (same largest tensor with torch.compile(backend="eager")); dynamo may trace the mode.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for value in tree_leaves(result):
            if isinstance(value, torch.Tensor):
                numel = value.untyped_storage().nbytes() // max(1, value.element_size())
                if numel > self.numel:
                    self.numel, self.shape = numel, tuple(value.shape)
        return result


def largest_intermediate(fn: Callable, *args, **kwargs) -> tuple[object, int, tuple[int, ...]]:
    """Call ``fn(*args, **kwargs)`` and report the largest tensor any torch operation made inside.

    Linear attention must never hold the ``(N, L)`` similarity matrix: with a small feature
    dimension its largest tensor has about ``N * F * M`` entries, far fewer than ``N * L``.

    Returns
    -------
    result
        What ``fn`` returned.
    numel : int
        Number of entries of the largest tensor storage allocated during the call, including the
        intermediate results inside a single ``einsum`` or ``matmul``.
    shape : tuple of int
        Its shape.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    watcher = _LargestTensor()
    with watcher:
        result = fn(*args, **kwargs)
    return result, watcher.numel, watcher.shape
