"""Times a student can trust (issue 36): every time a notebook states comes from its benchmark.

Each master's introduction has one line, written by ``benchmarks/busy.py --write-times`` from the
idle figures ``benchmarks/busy.py --idle`` recorded in ``benchmarks/figures.json``: both settings,
training and the whole notebook, on an idle 2-core machine. No other cell of the notebook claims how
long it or its training takes, and the site's figures page is the recorded quick figures.
"""

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO / "benchmarks"))  # the benchmarks are scripts that import each other by plain name

from busy import FIGURES, STATED_TIMES_START, readme_table, stated_times  # noqa: E402

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

SLUGS = sorted(p.parent.name for p in (REPO / "solutions").glob("*/*.ipynb") if p.stem == p.parent.name)
FIGURES_OF = json.loads(FIGURES.read_text())
#: A claim of how long something takes in minutes (``min(`` and ``min–max`` are no claim).
MINUTES = re.compile(r"\bminutes?\b", re.IGNORECASE)
#: Any duration, for the first code cell's comment on the setting.
DURATION = re.compile(r"\b\d+(\.\d+)?\s*(s|sec|min)\b|\b(seconds?|minutes?|hours?)\b", re.IGNORECASE)


def notebooks(slug: str) -> list[tuple[str, nbformat.NotebookNode]]:
    return [(path.relative_to(REPO).as_posix(), nbformat.read(path, as_version=4))
            for path in (REPO / "solutions" / slug / f"{slug}.ipynb", REPO / "notebooks" / slug / f"{slug}.ipynb")]


@pytest.mark.parametrize("slug", SLUGS)
def test_the_introduction_states_the_benchmarked_times_once(slug):
    figures = FIGURES_OF[slug]
    assert all(f["cores"] == 2 for f in figures.values()), figures
    sentence = stated_times(figures)
    for name, nb in notebooks(slug):
        lines = [line for cell in nb.cells if cell.cell_type == "markdown" for line in cell.source.splitlines()
                 if line.startswith(STATED_TIMES_START)]
        assert lines == [sentence], (f"{name} must state, in its introduction, exactly: {sentence}\n"
                                     "(benchmarks/busy.py --write-times, then course build)")
        assert sentence in nb.cells[1].source, f"{name}: the time sentence belongs in the introduction"


@pytest.mark.parametrize("slug", SLUGS)
def test_no_other_cell_claims_how_long_the_notebook_takes(slug):
    for name, nb in notebooks(slug):
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown":
                text = "\n".join(line for line in cell.source.splitlines() if not line.startswith(STATED_TIMES_START))
            elif cell.cell_type == "code":
                text = "\n".join(line.split("#", 1)[1] for line in cell.source.splitlines() if "#" in line)
            else:
                continue
            assert not MINUTES.search(text), f"{name}, cell {index}: {MINUTES.search(text).string[:300]!r}"
            setting_lines = [line for line in cell.source.splitlines() if "use_setting(" in line and "#" in line]
            for line in setting_lines:
                assert not DURATION.search(line.split("#", 1)[1]), f"{name}: {line!r}"


def test_the_sites_figures_page_is_the_recorded_quick_figures():
    """The documentation's "Measured figures" page is generated from figures.json when the site is
    built (docs/hooks/generated_pages.py): its table is the records', whatever they hold."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("generated_pages", REPO / "docs" / "hooks" / "generated_pages.py")
    pages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pages)
    page = pages.results_page()
    assert readme_table({slug: FIGURES_OF[slug] for slug in SLUGS}) in page
    for slug in SLUGS:
        assert stated_times(FIGURES_OF[slug]).removeprefix(STATED_TIMES_START).strip() in page
