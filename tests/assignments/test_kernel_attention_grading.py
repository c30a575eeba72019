"""What is particular to kernel_attention's batch: the zip's contents, the students' exports with
and without LaTeX, partial credit, the results files, resuming, and the forgery no seal can stop.

Its one sealed grading run (the ``graded`` fixture in conftest.py) holds the sample submissions,
every known-wrong and known-correct implementation from ``kernel_attention_variants``, the
students' exported zips and the adversarial submissions; the checks every assignment shares (sync,
full marks, variants, a row for each) are in ``test_assignment_batches``.
"""

import subprocess
import tomllib
import zipfile

import nbformat
import yaml

from autograder.build.assign import build
from autograder.build.check import leak_problems
from autograder.grade.grader import Grader
from autograder.grade.unsealed import run_worker

from tests.support.batches import SLUG, REPO, LIMITS, variant_notebook
from tests.kernel_attention_variants import WRONG
from tests.support.student_run import latex_or_skip, printed


def test_autograder_zip_carries_golden_values_helpers_and_the_pinned_environment(layout, fresh_notebooks):
    with zipfile.ZipFile(layout.autograder_zip(SLUG)) as zf:
        names = set(zf.namelist())
        environment = yaml.safe_load(zf.read("environment.yml"))
        setup = zf.read("setup.sh").decode()
        entry = zf.read("run_otter.py").decode()
        loads_gpt = any("load_gpt(" in zf.read(n).decode() for n in names if n.startswith("tests/"))
    assert {"files/golden_values.json", "files/helpers/golden.py", "files/helpers/__init__.py"} <= names
    # Gradescope runs run_otter.py: it grades sealed through the bundle's grader, shipped beside it
    assert "from autograder.platforms.gradescope import main" in entry
    carried = {n.removeprefix("course/autograder/") for n in names if n.startswith("course/autograder/")}
    assert {"platforms/gradescope.py", "sandbox/session.py", "judge/verdicts.py", "sandbox/seal.py", "sandbox/protocol.py",
            "sandbox/runner.py", "judge/sampling.py"} <= carried
    assert not {n.split("/")[0] for n in carried} & {"build", "pdf.py", "cli.py", "demo.py", "report"}, carried
    assert not any("__pycache__" in name for name in names)
    # Gradescope builds its image from environment.yml: the pins' Python and the CPU build of torch.
    assert "python=3.11" in environment["dependencies"]
    pip = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_pin = next(p for p in pins if p.startswith("torch=="))
    otter_version = next(p for p in pins if p.startswith("otter-grader")).split("==")[1]
    assert torch_pin in pip and "--extra-index-url https://download.pytorch.org/whl/cpu" in pip
    assert f"otter-grader[grading,plugins]=={otter_version}" in pip  # added by otter, not by us
    assert not any(p.startswith(("jupyterlab", "otter-grader[grading]")) for p in pip)
    # A requirements list cannot say --no-deps: setup.sh installs those packages after the environment.
    no_deps = [line for line in (REPO / "requirements-no-deps.txt").read_text().splitlines() if line and line[0] != "#"]
    assert f"mamba run -n otter-env pip install --no-deps {' '.join(no_deps)}" in setup
    assert setup.index("--no-deps") < setup.index("prepare_image()")  # then the image is readied for sealed grading
    assert not loads_gpt  # so prepare_image converts no GPT into this assignment's image


def test_student_notebook_and_helpers_leak_nothing(layout, fresh_notebooks):
    assert leak_problems(layout) == []


def test_exported_zip_holds_the_notebook_and_a_pdf_when_latex_is_installed(submissions, tmp_path):
    latex_or_skip()
    folder, _, _ = submissions
    with zipfile.ZipFile(folder / "exports" / "with_pdf.zip") as zf:
        names = zf.namelist()
        pdf = zf.read(f"{SLUG}.pdf") if f"{SLUG}.pdf" in names else b""
    assert f"{SLUG}.ipynb" in names
    assert pdf.startswith(b"%PDF"), names
    # The PDF holds the written answers and the three plots that are part of the answers.
    (tmp_path / "export.pdf").write_bytes(pdf)
    listing = subprocess.run(["pdfimages", "-list", str(tmp_path / "export.pdf")], capture_output=True,
                             text=True, check=True).stdout.splitlines()[2:]
    assert len(listing) >= 3, listing
    text = subprocess.run(["pdftotext", str(tmp_path / "export.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert "Question 7c (written)" in text and "timing: 3 steps in" in text


def test_export_without_latex_still_gives_a_gradable_zip_and_says_so(submissions, tmp_path):
    folder, _, _ = submissions
    with zipfile.ZipFile(folder / "exports" / "without_latex.zip") as zf:
        names = zf.namelist()
    assert f"{SLUG}.ipynb" in names and not any(n.endswith(".pdf") for n in names), names
    said = printed(folder.parent / "student_without_latex" / f"{SLUG}.ipynb")
    assert "LaTeX (xelatex + pandoc) not found" in said and "Upload this file" in said


def test_solved_student_notebook_runs_top_to_bottom_and_passes_its_public_checks(submissions):
    folder, _, _ = submissions
    said = printed(folder.parent / "student_without_latex" / f"{SLUG}.ipynb")  # run_as_student raises on any error
    assert said.count("All test cases passed!") == 6, said
    assert "failed" not in said.lower()
    # progress bars end as a summary line, not as a widget frozen at its first frame
    assert "RFF error: 4 steps in" in said and "timing: 3 steps in" in said and "0%|" not in said


def test_partial_submission_keeps_the_points_of_its_finished_parts(graded):
    rows = graded[0]
    partial = rows["samples/partial.ipynb"]
    assert 0 < partial["total"] < partial["possible"]


def test_results_files_have_one_row_per_submission(graded):
    rows, out = graded
    references = out.parent / f"{out.name}_references"  # graded apart (batches.grade_batch)
    csv_lines = [line for folder in (out, references)
                 for line in (folder / "results.csv").read_text().strip().splitlines()[1:]]
    assert len(csv_lines) == len(rows)
    assert sum(len(list((folder / "feedback").glob("*.txt"))) for folder in (out, references)) == len(rows)
    feedback = (out / "feedback" / "samples__blank.ipynb.txt").read_text()
    assert "FAILED" in feedback and "Score: 0" in feedback
    notebook = variant_notebook(next(v for v in WRONG if v["name"] == "softmax_missing_sqrt_d"))
    wrong = (out / "feedback" / f"variants__{notebook}.ipynb.txt").read_text()
    assert "softmax/plain_out: values differ from the reference: largest error" in wrong
    for text in (feedback, wrong):  # hidden tests give their verdict, never their code
        assert "expect(" not in text and "torch.randn" not in text


def test_a_second_run_resumes_and_regrades_only_what_changed(layout, graded, submissions, tmp_path):
    rows, out = graded
    folder, _, _ = submissions
    # Rebuilding an unchanged master gives the same autograder bytes, so no row goes stale.
    build(layout, SLUG, notebooks_dir=tmp_path, log=lambda *args: None)
    changed = folder / "samples" / "corrupted.ipynb"
    changed.write_text(changed.read_text() + "\n}")  # still broken, but different bytes
    messages = []
    graded_here = len(list((out / "rows").glob("*.json")))  # the references were graded apart: these regrade
    again = Grader(layout, folder, out, LIMITS, jobs=2).run(log=messages.append)
    assert any(f"{graded_here - 1} submission(s) already graded" in m for m in messages), messages
    assert {r["file"]: r["total"] for r in again} == {f: r["total"] for f, r in rows.items()}


def test_the_graders_own_ipython_startup_scripts_do_not_reach_the_kernels(layout, submissions, tmp_path, monkeypatch):
    folder, _, _ = submissions
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    marker = tmp_path / "startup_ran"
    (startup / "00-sabotage.py").write_text(f"open({str(marker)!r}, 'w').close()\nimport torch\ntorch.softmax = None\n")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    result = run_worker(folder / "samples" / "complete.ipynb", layout.autograder_zip(SLUG), LIMITS)
    assert result["status"] == "ok", result["message"]
    assert not marker.exists()


def test_forging_the_collected_values_passes_only_what_one_line_functions_pass(layout, submissions, tmp_path):
    """What no seal can stop (issue 35): the values are sent from the student's kernel, so a notebook
    can send whatever a property accepts. It gets exactly the hidden tests that rest on properties
    alone, which a one-line function passes as well (exact softmax attention is a good enough
    "approximation", a prefix sum of V is causal), and nothing that needs a golden value, the two
    largest-tensor tests included."""
    from tests.support.adversarial import FORGEABLE_PROPERTIES, FORGES_THE_COLLECTED_VALUES, with_attack
    from tests.support.notebook_edits import replace_function

    folder, _, _ = submissions
    blank = nbformat.read(folder / "samples" / "blank.ipynb", as_version=4)
    one_liners = nbformat.read(folder / "samples" / "complete.ipynb", as_version=4)
    exact = "    return torch.softmax(Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5, dim=-1) @ V\n"
    for name, source in [("rff_attention", "def rff_attention(Q, K, V, num_features, seed):\n" + exact),
                         ("performer_attention", "def performer_attention(Q, K, V, num_features, seed):\n" + exact),
                         ("causal_linear_attention", "def causal_linear_attention(Q, K, V, feature_map):\n"
                                                     "    return V.cumsum(-2)\n")]:
        one_liners = replace_function(one_liners, name, source)
    (tmp_path / "subs").mkdir()
    nbformat.write(with_attack(blank, FORGES_THE_COLLECTED_VALUES), tmp_path / "subs" / "forged.ipynb")
    nbformat.write(one_liners, tmp_path / "subs" / "one_liners.ipynb")
    rows = {row["file"]: row for row in Grader(layout, tmp_path / "subs", tmp_path / "out", LIMITS, jobs=2).run(
        log=lambda *args: None)}
    passed = {name: {case["test"] for q in row["questions"].values() for case in q["cases"] if case["hidden"] and case["passed"]}
              for name, row in rows.items()}
    assert passed["forged.ipynb"] == FORGEABLE_PROPERTIES, rows["forged.ipynb"]["message"]
    assert FORGEABLE_PROPERTIES <= passed["one_liners.ipynb"]
    # the one-line functions lose every golden test of their functions
    assert not passed["one_liners.ipynb"] & {"test_rff_attention_hidden_golden", "test_performer_hidden_golden",
                                            "test_causal_linear_hidden_golden"}
