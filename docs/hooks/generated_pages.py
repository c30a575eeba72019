"""MkDocs hook: the pages that are made from the code and the records, never written by hand.

- ``instructors/cli.md``: every ``course`` command and option, from the parser itself
  (:func:`autograder.cli.parser`), so the reference cannot fall behind the command;
- ``instructors/limits.md``: every limit of grading, from :mod:`autograder.limits`, so no page can
  state a number the grader does not use;
- ``results.md``: the measured figures, from the records in ``benchmarks/`` (``figures.json``:
  notebook times idle and beside a busy program; ``evidence.json``: how often the reference answers'
  claims held over seeds and threads), with the date each was measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parents[2]


def on_files(files, config):
    for name, content in (("instructors/cli.md", cli_page()), ("instructors/limits.md", limits_page()),
                          ("results.md", results_page())):
        files.append(File.generated(config, name, content=content))
    return files


# ----------------------------------------------------------------------------- the limits
def _mib(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def limits_page() -> str:
    sys.path.insert(0, str(REPO))
    try:
        from autograder import limits
    finally:
        sys.path.remove(str(REPO))
    d, caps = limits.DEFAULT_LIMITS, limits.RUNNER_CAPS
    rows = [
        ("a submission's run", "wall-clock time", f"{d.timeout:g} s", "`course grade --timeout`; nbgrader's `Execute.timeout`"),
        ("a submission's run", "memory, all its processes together", f"{d.memory_mb} MB", "`--memory`"),
        ("a submission's run", "processes at once", f"{d.processes}", "`--processes`"),
        ("a submission's run", "threads per process", f"{limits.THREADS_PER_PROCESS}", ""),
        ("a submission's run", "open descriptors per process", f"{limits.OPEN_FILES}", ""),
        ("a submission's run", "files written, all together", f"{d.disk_mb} MB", ""),
        ("a submission's run", "files owned / folder depth", f"{limits.MAX_FILES:,} / {limits.MAX_DEPTH}", ""),
        ("a submission's run", "printed output kept", _mib(d.output_bytes), ""),
        ("a submission's run", "address space per process (a backstop only)",
         "8 x the memory limit, or the machine's memory if larger", ""),
        ("what the runner sends", "a test's name", f"{caps.test_name_chars} characters", ""),
        ("what the runner sends", "one collected value / all of a run", f"{_mib(caps.value_line_bytes)} / {_mib(caps.values_bytes)}", ""),
        ("what the runner sends", "an executed notebook (`course pdf`)", _mib(caps.notebook_chars), ""),
        ("what the runner sends", "all its messages", _mib(d.channel_bytes), ""),
        ("an upload", "a notebook (a file, or inside a zip)", f"{limits.MAX_NOTEBOOK_BYTES >> 20} MB", ""),
        ("an upload", "a zip entry's inflation past " + _mib(limits.RATIO_FREE_BYTES), f"{limits.MAX_COMPRESSION_RATIO} x its compressed size", ""),
    ]
    lines = ["# Limits", "",
             "Generated from `autograder/limits.py` when the site is built: the one place the grader, the "
             "Gradescope autograder and nbgrader's configuration take these numbers from. Why each limit is "
             "there, and what happens at it, is on [Sealed grading](security.md).", "",
             "| applies to | what | limit | set by |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {e} |" for a, b, c, e in rows]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the command reference
def cli_page() -> str:
    sys.path.insert(0, str(REPO))
    try:
        from autograder.cli import parser
    finally:
        sys.path.remove(str(REPO))
    top = parser()
    lines = ["# Command reference", "",
             "Generated from `course`'s own parser when the site is built; `course COMMAND --help` prints "
             "the same. What each command does, with examples, is on [Commands](commands.md).", "",
             "```text", top.format_usage().strip(), "```", "", top.description or "", ""]
    lines += _options(top)
    for name, sub in _subcommands(top).items():
        lines += [f"## course {name}", "", sub.description or _help_of(top, name), "", "```text",
                  sub.format_usage().strip(), "```", ""]
        lines += _options(sub)
    return "\n".join(lines) + "\n"


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help_of(p: argparse.ArgumentParser, name: str) -> str:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return (choice.help or "").capitalize() + "."
    return ""


def _options(p: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in p._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest.upper()}`"
        if action.metavar and action.option_strings:
            name += f" `{action.metavar}`"
        default = "" if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings \
            or "default" in (action.help or "") else f" (default: `{action.default}`)"
        text = (action.help or "").replace("|", "\\|").replace("%%", "%") % {"default": action.default} \
            if action.help and "%(" in action.help else (action.help or "").replace("|", "\\|")
        rows.append(f"| {name} | {text}{default} |")
    return (["| argument | meaning |", "|---|---|", *rows, ""] if rows else [])


# ----------------------------------------------------------------------------- the measured figures
def _busy_module():
    """``benchmarks/busy.py``, whose functions write the notebooks' time lines from the same records."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("course_busy_for_docs", REPO / "benchmarks" / "busy.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def results_page() -> str:
    busy = _busy_module()
    figures = json.loads((REPO / "benchmarks" / "figures.json").read_text())
    lines = ["# Measured figures", "",
             "Every figure here is read from a record in `benchmarks/` when the site is built; the benchmark "
             "that wrote it is named with it. A figure moves only when its benchmark is run again.", "",
             "## Notebooks on a busy laptop", "",
             "The quick setting on 2 cores, each solved notebook in a fresh kernel, one run each "
             "(`benchmarks/busy.py`, recorded in `benchmarks/figures.json`). The targets: a run beside one "
             "busy program at most 1.6 times the idle one, and an idle run at most 1.10 times torch's "
             "default with its threads held fixed.", "", busy.readme_table(figures), "",
             "## The times the notebooks state", "",
             "Each notebook's introduction carries one line written from these records "
             "(`benchmarks/busy.py --write-times`); `tests/assignments/test_stated_times.py` keeps them in step.", ""]
    for slug in sorted(figures):
        lines.append(f"- **{slug}**: {busy.stated_times(figures[slug]).removeprefix(busy.STATED_TIMES_START).strip()}")
    lines += ["", "## Evidence for the written questions' reference answers", "",
              "`benchmarks/evidence.py` runs a solved notebook in the quick setting on several seeds and "
              "thread counts and counts how often each claim of a reference answer held "
              "(`benchmarks/evidence.json`).", ""]
    lines += _evidence_table(json.loads((REPO / "benchmarks" / "evidence.json").read_text()))
    parts = REPO / "benchmarks" / "submission_time.json"
    if parts.is_file():
        lines += ["", "## One sealed submission, part by part", ""] + _submission_table(json.loads(parts.read_text()))
    suite = REPO / "benchmarks" / "suite_times.json"
    if suite.is_file():
        lines += ["", "## The test suite", ""] + _suite_table(json.loads(suite.read_text()))
    return "\n".join(lines) + "\n"


def _suite_table(record: dict) -> list[str]:
    """The suite's time by test file, from ``benchmarks/suite_times.py --record``."""
    total = record["seconds"]
    rows = [f"{record['tests']} tests in {total / 60:.1f} min of pytest ({record['note'] or 'one run'}; "
            f"commit {record['commit']}, {record['date']}; "
            "`benchmarks/suite_times.py`, recorded in `benchmarks/suite_times.json`). The target is 25 minutes.", "",
            "| test file | seconds | share |", "|---|---|---|"]
    rows += [f"| `{path}` | {seconds} | {seconds / max(total, 1):.0%} |" for path, seconds in list(record["files"].items())[:15]]
    return rows


def _submission_table(record: dict) -> list[str]:
    """Each assignment's complete sample graded sealed, by part, beside nbclient alone and ``otter run``
    (``benchmarks/submission_time.py --record``)."""
    rows = [f"One submission at a time, the grading setting ({record['note'] or 'one run'}; commit {record['commit']}, "
            f"{record['date']}; `benchmarks/submission_time.py`, recorded in `benchmarks/submission_time.json`). "
            "The targets: sealed at most 0.35 of `otter run` on kernel_attention and 0.5 on every assignment. "
            f"The sandbox session's start, once per grading run: {record['session_start']:.1f} s"
            + (f" (its fork server ready after {record['server_ready']:.1f} s). " if record.get("server_ready") else ". ") +
            "Sealed is an assignment's second submission in a session whose fork server is ready; its first also "
            "pays what the session does once (transformers' model code imported by the server, a measure's library "
            "imported by the judge): its own column, where recorded.", "",
            "| assignment | sealed | to cells done | tests | first of the assignment | nbclient alone | otter run | sealed / otter |",
            "|---|---|---|---|---|---|---|---|"]
    for slug, f in record["assignments"].items():
        s = f["sealed"]
        first = f"{f['sealed_first']['total']:.1f} s" if "sealed_first" in f else "not recorded"
        rows.append(f"| {slug} | {s['total']:.1f} s | {s['sandbox_to_cells_done']:.1f} s | {s['tests']:.1f} s | {first} | "
                    f"{f['nbclient']['total']:.1f} s | {f['otter_run']:.1f} s | {f['sealed_over_otter']:.2f} |")
    return rows


def _evidence_table(records: dict) -> list[str]:
    """How often each claim held, judged by ``benchmarks/evidence.py``'s own claims."""
    sys.path.insert(0, str(REPO))
    try:
        from benchmarks.evidence import judged
    finally:
        sys.path.remove(str(REPO))
    rows = ["| notebook | question | what the reference answer claims | held |", "|---|---|---|---|"]
    for slug, runs in sorted(records.items()):
        dates = sorted({run.get("measured", "") for run in runs.values()} - {""})
        for claim, held in judged(slug, runs):
            rows.append(f"| {slug} | {claim.question} | {claim.says.replace('|', '/')} | "
                        f"{sum(held.values())}/{len(held)} (measured {', '.join(dates) or '?'}) |")
    return rows
