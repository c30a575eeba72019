"""Small tools of the ``kernel_attention`` assignment: the ``elu(x) + 1`` feature map, the causal
mask and the relative error of an approximation."""

from __future__ import annotations

import math
from numbers import Integral

import torch
import torch.nn.functional as F

from ..validation import check_tensor

__all__ = ["elu_feature_map", "causal_mask", "relative_error"]


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """The positive feature map ``elu(x) + 1`` of "Transformers are RNNs" (Katharopoulos et al.).

    Parameters
    ----------
    x : torch.Tensor, shape (..., D), floating point

    Returns
    -------
    torch.Tensor, shape (..., D)
        Every entry is strictly positive, so linear attention with this map never divides by
        zero.
    """
    check_tensor("x", x, min_ndim=1, floating=True)
    return F.elu(x) + 1.0


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (n, n) mask that is True where query ``i`` may attend to key ``j``, i.e. ``j <= i``.

    Parameters
    ----------
    n : int
        Sequence length, at least 1.
    device : torch.device or str, optional

    Returns
    -------
    torch.Tensor, shape (n, n), dtype bool
        Lower-triangular (diagonal included); broadcasts against (..., n, n) score tensors.
    """
    if not isinstance(n, Integral) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    return torch.ones(int(n), int(n), dtype=torch.bool, device=device).tril()


def relative_error(approx: torch.Tensor, exact: torch.Tensor) -> float:
    """Relative Frobenius error ``||approx - exact|| / ||exact||`` over all entries.

    Parameters
    ----------
    approx, exact : torch.Tensor, same shape

    Returns
    -------
    float
        ``inf`` when ``approx`` holds nan or inf (a failed approximation, not a crash).
    """
    check_tensor("approx", approx, floating=True)
    check_tensor("exact", exact, floating=True)
    if approx.shape != exact.shape:
        raise ValueError(f"approx has shape {tuple(approx.shape)} but exact has shape {tuple(exact.shape)}")
    approx, exact = approx.detach().double(), exact.detach().double()
    if not torch.isfinite(approx).all():
        return math.inf
    return float((approx - exact).norm() / exact.norm().clamp_min(1e-300))
