"""The autograder zip run the way Gradescope runs it: sealed there as `course grade` is here.

Gradescope unpacks the zip into /autograder/source, puts the upload in /autograder/submission and
runs the zip's entry point as root in a container without user namespaces. `emulate` does that on
this machine (a temp folder bound at /autograder in a private mount namespace) and forces the
grader's POSIX separation, the mode Gradescope's containers get. The three one-cell forgeries that
give a wrong notebook full marks under stock otter (the control below) must score what the wrong
notebook scores honestly; the complete sample, its export zip and a known-wrong variant score as
`course grade` scores them; the repository's attacks score nothing and leave nothing running.
"""

import json
import os
import queue
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from tests.support.adversarial import GRADESCOPE_ATTACKS, MARKER, with_attack, wrong_everywhere
from autograder.platforms.gradescope import emulate
from autograder.grade.grader import Limits
from autograder.grade.unsealed import run_worker
from tests.support.batches import SLUG, variant_notebook
from tests.support.seal_attacks import FORGED, HIDDEN_SOURCE_MARK, processes_with, seal_attacks, traces

#: The attacks graded through the zip: every attack on the seal, and the older ones that race it
#: (the rest are graded with POSIX separation by `course grade --sandbox posix` in test_seal.py,
#: which is the same seal without a container's start-up for each).
THROUGH_THE_ZIP = {a["name"] for a in seal_attacks()} | {
    "forges_result_messages_and_values", "kills_the_grader", "memory_split_over_children", "bounded_process_flood"}
#: Graded one at a time with no control group (COURSE_CGROUP=off), as in Gradescope's containers, where
#: memory no /proc reading shows is counted as what the machine lost while the one run went on; with
#: the complete sample, which must keep full marks there too. The rest go two at once, kernel-counted.
WITHOUT_CGROUPS = {"attack:memory_in_socket_buffers", "attack:memory_in_memfds_in_flight", "attack:memory_in_memfds",
                   "attack:shared_memory_past_path_max", "attack:disk_past_path_max", "complete"}


def _variant() -> str:
    from tests.kernel_attention_variants import WRONG

    return variant_notebook(next(v for v in WRONG if v["name"] == "softmax_missing_sqrt_d"))


VARIANT = _variant()


@pytest.fixture(scope="module")
def root_only():
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the Gradescope emulation needs root (a mount namespace, and a uid to drop to)")
        pytest.skip("the Gradescope emulation needs root")


@pytest.fixture(scope="module")
def uploads(submissions, tmp_path_factory):
    """{name: path} of what is uploaded: samples, a variant, the wrong notebook and its forgeries."""
    folder, expected, _ = submissions
    out = tmp_path_factory.mktemp("gradescope_uploads")
    complete = nbformat.read(folder / "samples" / "complete.ipynb", as_version=4)
    wrong = wrong_everywhere(complete)
    nbformat.write(wrong, out / "wrong_everywhere.ipynb")
    for name, cell in GRADESCOPE_ATTACKS.items():
        nbformat.write(with_attack(wrong, cell), out / f"{name}.ipynb")
    found = {p.stem: p for p in out.glob("*.ipynb")}
    found.update({"complete": folder / "samples" / "complete.ipynb",
                  "complete_export": folder / "samples" / "complete_export.zip",
                  "variant": folder / "variants" / f"{VARIANT}.ipynb",
                  "two_notebooks": folder / "adversarial" / "two_notebooks.zip"})
    for path in sorted((folder / "adversarial").glob("*.ipynb")):
        if path.stem in THROUGH_THE_ZIP and f"adversarial/{path.name}" in expected:
            found[f"attack:{path.stem}"] = path
    return found


@pytest.fixture(scope="module")
def gradescope(root_only, layout, uploads, tmp_path_factory):
    """{name: results.json} of every upload graded through the zip as Gradescope runs it; two at
    once, each with its own sandbox uids (one container each on Gradescope). The zip is checked
    from a private folder, as `course gradescope-check` demands."""
    private = tmp_path_factory.mktemp("gradescope_zip")
    private.chmod(0o700)
    zip_path = Path(shutil.copy(layout.autograder_zip(SLUG), private))
    uid_bases = queue.Queue()  # one per worker: two graders with one uid would kill each other's processes
    for base in (64100, 64110):
        uid_bases.put(base)

    def run(item, env=None):
        name, path = item
        base = uid_bases.get()
        try:
            return name, emulate(zip_path, path, env={"COURSE_SANDBOX_UID_BASE": str(base), **(env or {})})
        finally:
            uid_bases.put(base)

    alone = {name: path for name, path in uploads.items() if name in WITHOUT_CGROUPS}
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(pool.map(run, sorted((n, p) for n, p in uploads.items() if n not in alone)))
    results.update(run(item, {"COURSE_CGROUP": "off"}) for item in sorted(alone.items()))
    return results


def test_stock_otter_gives_a_wrong_notebook_full_marks_under_each_forgery(layout, uploads, gradescope):
    """The control: otter comparing golden values in the student's kernel is fooled by each one
    (so the sealed scores below show the seal at work, not dud attacks)."""
    honest = gradescope["wrong_everywhere"]["score"]

    def stock_otter(name):  # each in its own otter process: two at once, one per core
        return name, run_worker(uploads[name], layout.autograder_zip(SLUG), Limits(timeout=120, memory_mb=4096))

    with ThreadPoolExecutor(max_workers=2) as pool:
        for name, result in pool.map(stock_otter, GRADESCOPE_ATTACKS):
            forged = sum(q["score"] for q in result["questions"].values())
            assert forged == 22 > honest, (name, forged, result["message"])


def test_forgeries_score_what_the_wrong_notebook_scores_honestly(gradescope):
    honest = gradescope["wrong_everywhere"]
    assert honest["score"] < 22 and "posix" in honest["output"], honest["output"]
    for name in GRADESCOPE_ATTACKS:
        assert gradescope[name]["score"] <= honest["score"], (name, gradescope[name]["output"])


def test_correct_and_wrong_notebooks_score_as_course_grade_scores_them(gradescope, graded):
    rows = graded[0]
    for name, row in (("complete", "samples/complete.ipynb"), ("complete_export", "samples/complete_export.zip")):
        assert gradescope[name]["score"] == 22 == rows[row]["total"], gradescope[name]["output"]
        assert "Status: ok." in gradescope[name]["output"]
    assert gradescope["variant"]["score"] == rows[f"variants/{VARIANT}.ipynb"]["total"] < 22


def test_results_are_in_gradescopes_format_with_hidden_tests_after_publishing(gradescope):
    results = gradescope["variant"]
    tests = results["tests"]
    assert tests[0]["name"] == "Grading" and tests[0]["visibility"] == "visible"
    graded = [t for t in tests[1:]]
    assert {t["visibility"] for t in graded} == {"visible", "after_published"}
    assert all(set(t) >= {"name", "score", "max_score", "status", "output"} for t in graded)
    assert sum(t["max_score"] for t in graded) == 22
    assert results["score"] == sum(t["score"] for t in graded)
    failed = [t for t in graded if t["status"] == "failed" and t["visibility"] == "after_published"]
    assert failed and any("differ" in t["output"] for t in failed), failed
    for test in failed:  # a verdict for the student, never the test's code or the expected values
        assert test["output"] and "expect(" not in test["output"] and "torch.randn" not in test["output"], test
    json.dumps(results)  # plain JSON


def test_attacks_score_nothing_and_leave_nothing_running(gradescope):
    attacks = {name: result for name, result in gradescope.items() if name.startswith("attack:")}
    assert len(attacks) == len(THROUGH_THE_ZIP)
    for name, result in attacks.items():
        assert result["score"] == 0, (name, result["output"])
        text = json.dumps(result)  # everything Gradescope shows the student, after publishing too
        assert FORGED not in text and HIDDEN_SOURCE_MARK not in text and "BREACH" not in text, (name, text[:2000])
    assert "memory" in attacks["attack:memory_in_memfds"]["output"]
    assert "all its files together" in attacks["attack:disk_in_many_files"]["output"]
    for name in ("memory_in_socket_buffers", "memory_in_memfds_in_flight"):  # counted with no control group
        assert "Status: memory." in attacks[f"attack:{name}"]["output"], attacks[f"attack:{name}"]["output"]
    assert "all its files together" in attacks["attack:disk_past_path_max"]["output"]
    assert "tampered" in attacks["attack:leaks_tests_through_every_field_it_writes"]["output"]
    assert traces() == []
    assert "processes" in attacks["attack:bounded_process_flood"]["output"]
    assert "memory" in attacks["attack:memory_split_over_children"]["output"]
    assert processes_with(MARKER) == [] and processes_with("course_runner.py") == []


def test_an_upload_that_is_not_one_notebook_is_refused_with_a_reason(gradescope):
    results = gradescope["two_notebooks"]
    assert results["score"] == 0 and "could not be graded" in results["output"], results["output"]
