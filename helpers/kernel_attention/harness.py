"""What the harnesses of the ``kernel_attention`` assignment share: checks of their arguments and of
the student's outputs, random queries, keys and values, and the axes to draw on. All private."""

from __future__ import annotations

from numbers import Integral, Real

import matplotlib.pyplot as plt
import numpy as np
import torch

__all__: list[str] = []


def _check_callable(name: str, fn) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be a function, got {type(fn).__name__}")


def _check_sizes(name: str, values, *, minimum: int = 1) -> list[int]:
    if isinstance(values, Integral):
        values = [values]
    try:
        values = list(values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of ints, got {type(values).__name__}") from None
    if not values or not all(isinstance(v, Integral) and not isinstance(v, bool) and v >= minimum for v in values):
        raise ValueError(f"{name} must be a non-empty sequence of ints >= {minimum}, got {values!r}")
    return [int(v) for v in values]


def _check_positive(name: str, value) -> float:
    if not isinstance(value, Real) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _output_of(name: str, result, shape: tuple[int, ...]) -> torch.Tensor:
    """The attention output of a student function (first element when it returns a tuple)."""
    shape = tuple(shape)
    if isinstance(result, (tuple, list)):
        if not result:
            raise TypeError(f"{name} returned an empty {type(result).__name__}")
        result = result[0]
    if not isinstance(result, torch.Tensor):
        raise TypeError(
            f"{name} returned {type(result).__name__}, expected a torch.Tensor of shape {shape}: "
            "is the function implemented?"
        )
    if tuple(result.shape) != tuple(shape):
        raise ValueError(f"{name} returned shape {tuple(result.shape)}, expected {tuple(shape)}")
    return result


def _qkv(generator: torch.Generator, batch: int, n: int, d: int, m: int, scale: float,
         dtype: torch.dtype = torch.float64):
    Q = torch.randn(batch, n, d, generator=generator, dtype=torch.float64) * scale  # (B, N, D)
    K = torch.randn(batch, n, d, generator=generator, dtype=torch.float64) * scale  # (B, N, D)
    V = torch.randn(batch, n, m, generator=generator, dtype=torch.float64)  # (B, N, M)
    return Q.to(dtype), K.to(dtype), V.to(dtype)


def _new_axes(ax, ncols: int, width: float = 5.2, height: float = 3.8):
    if ax is None:
        fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
        return fig, list(axes[0])
    axes = list(np.atleast_1d(ax))
    if len(axes) != ncols:
        raise ValueError(f"ax must hold {ncols} matplotlib Axes, got {len(axes)}")
    return axes[0].figure, axes
