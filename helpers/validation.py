"""Argument checks that give a clear message instead of a deep stack trace."""

from __future__ import annotations

import torch

__all__ = ["check_tensor"]


def check_tensor(name: str, x, *, ndim: int | None = None, min_ndim: int | None = None,
                 floating: bool = False, dtype: torch.dtype | None = None,
                 shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """Validate a tensor argument and return it.

    Parameters
    ----------
    name : str
        The argument's name, used in the error message.
    x : torch.Tensor
        The value to check.
    ndim, min_ndim : int, optional
        Exact or minimum number of dimensions.
    floating : bool
        Require a floating-point dtype.
    dtype : torch.dtype, optional
        Require exactly this dtype.
    shape : tuple of int, optional
        Require exactly this shape.

    Raises
    ------
    TypeError, ValueError
        Naming the argument and what was expected.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(x.shape)}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if min_ndim is not None and x.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {tuple(x.shape)}")
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {x.dtype}")
    return x
