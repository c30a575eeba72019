"""Harnesses for the ``kernel_attention`` assignment.

Everything here takes the *student's* functions as arguments and only builds inputs, measures
and plots. No function the students write (softmax attention, kernels, feature maps, the
associative or causal linear attention, random features) is implemented here; exact references
inside the plots come from the student's own ``softmax_attention``.

The one feature map provided, :func:`elu_feature_map` (``elu(x) + 1``, Katharopoulos et al.,
2020), is a cheap positive map used to time causal linear attention; it is not part of any
graded question.

:mod:`.tools` holds the small tools (the feature map, the causal mask, the relative error);
:mod:`.approximation` the error plots of random features; :mod:`.timing` the run-time comparison of
causal softmax and causal linear attention; :mod:`.harness` what these share (argument checks,
random inputs, axes). Every public name is importable from ``helpers.kernel_attention`` itself.
"""

from ..memory import largest_intermediate
from .approximation import plot_feature_map_error, plot_rff_error
from .timing import crossover_length, plot_causal_timing
from .tools import causal_mask, elu_feature_map, relative_error

__all__ = [
    # small tools (tools.py)
    "elu_feature_map",
    "causal_mask",
    "relative_error",
    # random features against softmax attention (approximation.py)
    "plot_rff_error",
    "plot_feature_map_error",
    # run time (timing.py)
    "plot_causal_timing",
    "crossover_length",
    # the largest intermediate tensor of a call (helpers.memory)
    "largest_intermediate",
]
