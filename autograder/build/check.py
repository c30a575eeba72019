"""``course check``: committed student notebooks are in sync with the masters and leak nothing.

Leaks looked for in ``notebooks/`` and ``helpers/``: otter markers, hidden test names, golden
keys or files, and any line of reference solution (code or written answer) from a master.
"""

from __future__ import annotations

import ast
import filecmp
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from helpers.core.contract import GOLDEN_FILENAME

from autograder.build import master
from autograder.build.assign import build
from autograder.layout import Layout

# (``<!-- BEGIN QUESTION -->`` is no leak: the students' PDF export, helpers.core.pdf, finds the written answers by it.)
MARKERS = re.compile(
    r"BEGIN SOLUTION|END SOLUTION|#\s*SOLUTION\b|BEGIN TESTS|END TESTS|ASSIGNMENT CONFIG|TEST CONFIG|#\s*HIDDEN\b",
    re.IGNORECASE,
)
MIN_LEAK_LINE = 16  # shorter lines (``return out``) are too generic to call a leak
# Training-loop plumbing every torch program writes the same way: no leak when a harness has it too.
BOILERPLATE = re.compile(r"with torch\.no_grad\(\):|optimizer\.(zero_grad|step)\(\w*\)|loss\.backward\(\)|super\(\)\.__init__\(\)")


@dataclass
class MasterSecrets:
    """What a master holds that students must not see."""
    solution_lines: set[str] = field(default_factory=set)
    hidden_tests: set[str] = field(default_factory=set)


def read_secrets(path: Path) -> MasterSecrets:
    secrets, public_lines = MasterSecrets(), set()
    for cell, place in master.walk(master.read(path)):
        if place.in_tests and cell.cell_type == "code":
            config, body = master.split_test_config(cell.source)
            if config.get("hidden", False):
                secrets.hidden_tests.update(n.name for n in ast.parse(body).body if isinstance(n, ast.FunctionDef))
        elif place.in_solution and cell.cell_type == "markdown":  # a written reference answer
            secrets.solution_lines.update(_lines(cell.source))
        elif cell.cell_type == "code":
            for line, is_solution in master.solution_lines(cell.source):
                (secrets.solution_lines if is_solution else public_lines).update(_lines(line))
        else:  # a prompt: what it says is public
            public_lines.update(_lines(cell.source))
    secrets.solution_lines -= public_lines
    return secrets


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines()
            if len(line.strip()) >= MIN_LEAK_LINE and not BOILERPLATE.fullmatch(line.strip())}


#: Text files a student folder or a release may hold (scanned for secrets line by line).
TEXT_SUFFIXES = {".py", ".md", ".txt", ".csv", ".json", ".yml", ".yaml", ".toml", ".cfg", ".html", ".js", ""}


def texts_of(root: Path, folders: list[Path] | None = None) -> dict[str, list[str]]:
    """File -> stripped lines, for every notebook (its cells, and its JSON: metadata holds public
    tests) and every text file under ``folders`` (default: all of ``root``)."""
    texts = {}
    for folder in folders or [root]:
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            name = str(path.relative_to(root))
            if path.suffix == ".ipynb":
                nb = nbformat.read(path, as_version=4)
                texts[name] = [line.strip() for cell in nb.cells for line in cell.source.splitlines()] + \
                    [line.strip() for line in nbformat.writes(nb).splitlines()]
            elif path.suffix.lower() in TEXT_SUFFIXES:
                try:
                    texts[name] = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
                except (UnicodeDecodeError, OSError):
                    continue
    return texts


def secret_problems(layout: Layout, texts: dict[str, list[str]], root: Path) -> list[str]:
    """What of the masters' secrets ``texts`` hold: otter markers, hidden test names, lines of a
    reference solution or written answer; and golden value files under ``root``."""
    problems = [f"{golden.relative_to(root)}: golden values file in the student folder" for golden in root.rglob(GOLDEN_FILENAME)]
    for slug in layout.slugs():
        secrets = read_secrets(layout.master(slug))
        for name, lines in texts.items():
            joined = "\n".join(lines)
            for marker in sorted(set(m.group(0) for m in MARKERS.finditer(joined))):
                problems.append(f"{name}: otter marker {marker!r}")
            for test in sorted(secrets.hidden_tests):
                if re.search(rf"\b{re.escape(test)}\b", joined):
                    problems.append(f"{name}: names hidden test {test} of {slug}")
            for line in sorted(secrets.solution_lines.intersection(lines)):
                problems.append(f"{name}: contains a line of {slug}'s reference solution: {line[:80]!r}")
    return problems


def leak_problems(layout: Layout) -> list[str]:
    texts = {name: lines for name, lines in texts_of(layout.root, [layout.notebooks, layout.helpers]).items()
             if name.endswith((".ipynb", ".py"))}
    return sorted(set(secret_problems(layout, texts, layout.notebooks)))


def sync_problems(layout: Layout, slugs: list[str], log=print) -> list[str]:
    """Rebuild into a temporary folder and compare with the committed notebooks/ byte for byte."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        for slug in slugs:
            build(layout, slug, notebooks_dir=Path(tmp), autograder_dir=Path(tmp) / "autograders", log=log)
            committed, fresh = layout.student_dir(slug), Path(tmp) / slug
            if not committed.is_dir():
                problems.append(f"notebooks/{slug} is missing: run `course build {slug}` and commit it")
                continue
            problems += [f"notebooks/{slug}/{p}: {why}" for p, why in _tree_differences(fresh, committed)]
    if problems:
        problems.append("the committed student notebooks are stale: run `course build` and commit notebooks/")
    return problems


def _tree_differences(fresh: Path, committed: Path):
    fresh_files = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
    committed_files = {p.relative_to(committed) for p in committed.rglob("*")
                       if p.is_file() and ".ipynb_checkpoints" not in p.parts and "__pycache__" not in p.parts}
    for rel in sorted(fresh_files - committed_files):
        yield rel, "missing from the committed folder"
    for rel in sorted(committed_files - fresh_files):
        yield rel, "committed but not produced by the build"
    for rel in sorted(fresh_files & committed_files):
        if not filecmp.cmp(fresh / rel, committed / rel, shallow=False):
            yield rel, "differs from a fresh build of the master"


def check(layout: Layout, slugs: list[str] | None = None, log=print) -> list[str]:
    slugs = slugs or layout.slugs()
    return sync_problems(layout, slugs, log=log) + leak_problems(layout)
