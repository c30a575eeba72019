"""Running a notebook top to bottom the way a student does: a fresh kernel in the notebook's folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from helpers.submission import latex_available

#: Set by .ci/run, which installs LaTeX: there the PDF export must be tested, never skipped.
REQUIRE_LATEX_ENV = "COURSE_REQUIRE_LATEX"


def latex_or_skip():
    """Skip (locally) or fail (in CI) a test that needs xelatex and pandoc."""
    import pytest

    if latex_available():
        return
    message = "xelatex and pandoc are not installed (apt-get install texlive-xetex texlive-fonts-recommended " \
              "texlive-plain-generic pandoc)"
    if os.environ.get(REQUIRE_LATEX_ENV) == "1":
        pytest.fail(message + f"; {REQUIRE_LATEX_ENV}=1 says this run must test the PDF export")
    pytest.skip(message)


def run_as_student(notebook: Path, workdir: Path, *, latex: bool, timeout: int = 600) -> Path:
    """Copy ``notebook`` into ``workdir`` under its assignment name, run every cell, return the zip.

    ``latex=False`` hides xelatex and pandoc from the kernel (only the virtual environment's
    ``bin`` stays on its PATH), as on a laptop without LaTeX.
    """
    nb = nbformat.read(notebook, as_version=4)
    name = nb.metadata["otter"]["assignment_name"]
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / f"{name}.ipynb"
    nbformat.write(nb, target)
    saved_path = os.environ["PATH"]
    if not latex:
        os.environ["PATH"] = str(Path(sys.executable).parent)  # the kernel inherits this
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(workdir)}}).execute()
    finally:
        os.environ["PATH"] = saved_path
    nbformat.write(nb, target)
    zips = sorted(workdir.glob("*.zip"))
    if len(zips) != 1:
        raise AssertionError(f"expected one submission zip in {workdir}, found {[z.name for z in zips]}")
    return zips[0]


def printed(nb_path: Path) -> str:
    """Everything the executed notebook printed (streams and text results)."""
    nb = nbformat.read(nb_path, as_version=4)
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)

