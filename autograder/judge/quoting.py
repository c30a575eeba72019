"""What of the sandbox's words may reach a reader: the one owner of that rule.

Everything a sandbox reports has passed through a kernel that ran the student's code after the
hidden tests went in, so any string in it (an error text, a test name, a key, a traceback) may
carry the tests' source. A row's message, a feedback file, results.json, Gradescope's results,
the report and the PDFs therefore show only:

- the grader's own words;
- names the grader knows itself: test names and golden keys from the autograder zip, the
  parameters of a test function (read from its source here), signal names;
- the name of a standard exception (Python's own, or the golden judge's ``GoldenMismatch``);
- the student's own error from their own cell, which the runner reports before any test enters
  the sandbox, cut to a short excerpt;
- for a failed public check, the words of one of its own messages as its source (read here) writes
  them, each value it fills in shown as "…" (:func:`public_check_wording`): text the student's
  notebook already holds.

Anything else a kernel wrote is dropped; outcomes of tests the assignment does not have are
counted as tampering, never quoted. Spreadsheet safety of results.csv lives here too: a cell a
submission named is written so that no spreadsheet evaluates it.
"""

from __future__ import annotations

import ast
import builtins
import re
import signal

#: Exception names a test's feedback may show: Python's own, and the golden judge's.
KNOWN_EXCEPTIONS = frozenset({name for name, value in vars(builtins).items()
                              if isinstance(value, type) and issubclass(value, BaseException)} | {"GoldenMismatch"})
#: Signal names the runner may report for a kernel that died.
SIGNAL_NAMES = frozenset(s.name for s in signal.Signals)
#: The runner's own words about a test file (a kernel that died or a file that reported nothing).
RUNNER_WORDS = re.compile(r"the test file reported nothing|the notebook's kernel (died|was killed by signal \d{1,2} "
                          r"\((?P<signal>[A-Z0-9]{1,12})\)|exited with code -?\d{1,3} \(os\._exit or a crash in a "
                          r"cell\?\)) during the tests")
#: The test driver's words for a test whose arguments the notebook lacks (the driver runs in the
#: kernel, so the names are checked against the test's own parameters before they are shown).
MISSING_NAMES = re.compile(r"the notebook does not define (?P<names>\w{1,60}(, \w{1,60}){0,9})")
#: What a collected record that carries an error (a value ``expect`` could not encode) is shown as.
UNREADABLE_VALUE = "the value is not a tensor, array, number or string that could be read"
#: How much of the student's own cell error (before any test ran) a status may show.
EXCERPT_CHARS = {"cell": 60, "ename": 80, "evalue": 200}
#: What a spreadsheet takes for the start of a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def exception_name(error, parameters: frozenset[str] | set[str] = frozenset()) -> str:
    """What a status or a test's feedback may say of an error raised after the tests went in: the
    runner's own words, a missing argument among ``parameters`` (the test's), or the name of a
    standard exception; never the error's text."""
    text = str(error)
    match = RUNNER_WORDS.fullmatch(text)
    if match and (match.group("signal") is None or match.group("signal") in SIGNAL_NAMES):
        return text
    match = MISSING_NAMES.fullmatch(text)
    if match and set(match.group("names").split(", ")) <= set(parameters):
        return text
    name = text.split(":", 1)[0].strip().rsplit(".", 1)[-1]
    return name if name in KNOWN_EXCEPTIONS else "an exception"


def excerpt(text, kind: str) -> str:
    """The student's own words (a line of their cell, their exception), cut short and printable."""
    cleaned = "".join(ch if ch.isprintable() else " " for ch in str(text))
    return cleaned[:EXCERPT_CHARS[kind]]


def parameters_by_test(sources: list[dict]) -> dict[str, frozenset[str]]:
    """{test name: its parameters} of the autograder's test files (read here, not in the kernel)."""
    return {node.name: frozenset(a.arg for a in node.args.args + node.args.kwonlyargs) for node in _test_functions(sources)}


def _test_functions(sources: list[dict]):
    """The functions defined at the top of the autograder's test files (a file that does not parse has none)."""
    for test_file in sources:
        try:
            tree = ast.parse(test_file["source"])
        except SyntaxError:
            continue
        yield from (node for node in tree.body if isinstance(node, ast.FunctionDef))


def known_outcomes(tests: list[dict], known_tests: set[str]) -> tuple[list[dict], int]:
    """(the test outcomes whose test the autograder has, how many named another test). A kernel can
    print any outcome it likes; one that names a test the grader does not know is never quoted."""
    kept, unknown = [], 0
    for message in tests:
        name = message.get("test")
        if name is None or (isinstance(name, str) and name in known_tests):
            kept.append(message)
        else:
            unknown += 1
    return kept, unknown


def spreadsheet_safe(value):
    """A CSV cell no spreadsheet evaluates: text that starts like a formula gets a leading quote
    (the convention Excel, LibreOffice and Sheets all read as "this is text")."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


__all__ = ["EXCERPT_CHARS", "KNOWN_EXCEPTIONS", "UNREADABLE_VALUE", "exception_name", "excerpt", "known_outcomes",
           "spreadsheet_safe", "parameters_by_test", "public_check_wording", "public_check_wordings"]


#: A public check's message is quoted only if its own words make up at least this many characters.
WORDING_CHARS = 12


def public_check_wordings(sources: list[dict], public: set[str]) -> dict[str, list[list[str | None]]]:
    """{public test name: each message its own source writes, as literal pieces and None for every
    value filled in}, read from the test files here. Only the function of that public test is read:
    a test file holds hidden tests too, whose words must never be shown."""
    return {node.name: [pieces for pieces in map(_pieces, ast.walk(node))
                        if pieces and sum(len(p) for p in pieces if p) >= WORDING_CHARS]
            for node in _test_functions(sources) if node.name in public}


def _pieces(node) -> list[str | None] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [part.value if isinstance(part, ast.Constant) else None for part in node.values]
    return None


def public_check_wording(error, wordings: list[list[str | None]]) -> str | None:
    """The message of a failed public check as its source words it (every filled-in value as "…"),
    if the error the kernel sent matches one of ``wordings``; else None. The kernel's own text is
    never shown: only the match is taken from it. A message the runner cut short matches nothing."""
    text = str(error)
    if ": " in text:
        text = text.split(": ", 1)[1]
    best = None
    for pieces in wordings:
        pattern = "".join(re.escape(p) if p is not None else ".*?" for p in pieces)
        if re.fullmatch(pattern, text, re.S) is None:
            continue
        shown = "".join(p if p is not None else "…" for p in pieces)
        if best is None or len(shown) > len(best):
            best = shown
    return best
