"""A failed public check says its message once.

otter prints a failed check as the line of the test that raised, then the exception: for an
``assert condition, "what went wrong"`` that line already holds the message's text, so the student
reads it twice, the second time with its values filled in. For an assertion that carries a message,
the message alone is printed; any other failure (a ``TypeError`` inside the student's function, an
assert without a message) keeps otter's line, which then helps to find the problem.

Installed when ``helpers`` is imported after otter (every notebook's first cell imports otter); the
grading sandbox never loads otter, so nothing changes there.
"""

from __future__ import annotations

import sys

__all__ = ["say_check_messages_once"]


def say_check_messages_once() -> bool:
    """Make otter print an assertion's message without the source line before it; True if otter
    was loaded (a second call changes nothing)."""
    module = sys.modules.get("otter.test_files.exception_test")
    if module is None:
        return False
    test_file = module.ExceptionTestFile
    otters_message = test_file._generate_error_message
    if getattr(otters_message, "says_messages_once", False):
        return True

    def error_message(self, excp: Exception, context: int = 0) -> str:
        said = str(excp).strip("'")
        if isinstance(excp, AssertionError) and said.strip():
            return f"{type(excp).__name__}: {said}"
        return otters_message(self, excp, context)

    error_message.says_messages_once = True
    test_file._generate_error_message = error_message
    return True
