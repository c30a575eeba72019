"""Running a notebook top to bottom the way a student does: a fresh kernel in the notebook's folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from helpers.submission import latex_available

#: Set by .ci/run, which installs LaTeX: there the PDF export must be tested, never skipped.
REQUIRE_LATEX_ENV = "COURSE_REQUIRE_LATEX"


def latex_or_skip():
    """Skip (locally) or fail (in CI) a test that needs LaTeX, pandoc and poppler's PDF tools."""
    import pytest

    if latex_available() and shutil.which("pdfimages") and shutil.which("pdftotext"):
        return
    message = "xelatex, pandoc or pdfimages is not installed (apt-get install texlive-xetex " \
              "texlive-fonts-recommended texlive-plain-generic pandoc poppler-utils)"
    if os.environ.get(REQUIRE_LATEX_ENV) == "1":
        pytest.fail(message + f"; {REQUIRE_LATEX_ENV}=1 says this run must test the PDF export")
    pytest.skip(message)


def _path_without_latex() -> str:
    """PATH minus every folder that holds xelatex or pandoc, as on a laptop without LaTeX."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if not any(Path(f, tool).exists() for tool in ("xelatex", "pandoc")))


def run_as_student(notebook: Path, workdir: Path, *, latex: bool, timeout: int = 600) -> Path:
    """Copy ``notebook`` into ``workdir`` under its assignment name and work through it as a student.

    Every cell runs in one fresh kernel; before the last cell (the export) the executed notebook
    is saved, as the notebook's text tells students to do, so the export sees the outputs and
    plots. ``latex=False`` hides xelatex and pandoc from the kernel. Returns the submission zip.
    """
    nb = nbformat.read(notebook, as_version=4)
    name = nb.metadata["otter"]["assignment_name"]
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / f"{name}.ipynb"
    nbformat.write(nb, target)  # otter's grader reads the notebook file from the first cell on
    saved_path = os.environ.get("PATH")
    if not latex:
        os.environ["PATH"] = _path_without_latex()  # the kernel inherits this
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(workdir)}})
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if index == len(nb.cells) - 1:
                    nbformat.write(nb, target)  # "Save the notebook, then run the cell below"
                client.execute_cell(cell, index)
    finally:
        if saved_path is None:
            os.environ.pop("PATH", None)
        else:
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

