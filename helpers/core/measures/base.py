"""What a measure is (:class:`Measure`), how one refuses values it cannot measure (:class:`Refused`),
and how a student's shape may be quoted: the part of :mod:`helpers.core.measures` that the
measures of assignments (:mod:`helpers.core.measures.assignments`) and of the grader
(``autograder/judge/sampling.py``) build on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Measure", "Refused", "shown_shape"]


@dataclass(frozen=True)
class Measure:
    """How the judge computes one measure (see the module's docstring)."""

    says: str  # what a message calls the number: "the largest difference is"
    # (arrays, reference, where, params) -> number, or (number, detail); None: the grader hands it in
    compute: Callable[..., Any] | None
    arrays: tuple[int, ...] = (1, 2)  # how many raw arrays it takes
    reference: str = "optional"  # "none", "optional" or "required"
    difference: bool = False  # exactly one of a second array and a reference
    shapes: str = "recorded"  # "recorded": each as the reference solution's; "free": the measure checks them
    params: tuple[str, ...] = ()  # the params it needs
    elementwise: bool = True  # reference and where broadcast to the first array's shape, a pair shares one
    text: bool = False  # takes strings (e.g. JSON text of examples made of strings), not arrays
    # modules its arithmetic imports when it first runs (torch, a course helper): the grader may load
    # them while the first sandbox runs (modules_for), instead of after it
    imports: tuple[str, ...] = ()

    def __getitem__(self, name: str):  # MEASURES[name]["says"], as when the table held dicts
        return getattr(self, name)


class Refused(ValueError):
    """Raised by a measure for values it cannot measure; its text is the student's message."""


#: A student's shape is quoted only this small: a shape is chosen by the student's code, and in sealed
#: grading its numbers must not be able to carry text (a zero-sized array can have any dimensions).
SHOWN_SHAPE_DIMS, SHOWN_SHAPE_SIZE = 4, 100_000


def shown_shape(shape) -> str:
    """A student's shape as a message may quote it: ``(3, 4)``; anything larger only by its number
    of dimensions ("a 7-d shape")."""
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return "a shape that could not be read"
    if len(dims) <= SHOWN_SHAPE_DIMS and all(0 <= d < SHOWN_SHAPE_SIZE for d in dims):
        return str(dims)
    return f"a {min(len(dims), 99)}-d shape"
