"""The autograder zip run the way Gradescope runs it: sealed there as `course grade` is here.

Gradescope unpacks the zip into /autograder/source, puts the upload in /autograder/submission and
runs the zip's entry point as root in a container without user namespaces. `emulate` does that on
this machine (a temp folder bound at /autograder in a private mount namespace) and forces the
grader's POSIX separation, the mode Gradescope's containers get. The three one-cell forgeries that
give a wrong notebook full marks under stock otter (the control below) must score what the wrong
notebook scores honestly; the complete sample, its export zip and a known-wrong variant score as
`course grade` scores them; the repository's attacks score nothing and leave nothing running; all of
it inside a container of Gradescope's default memory, which the zip leaves the grader room in.
"""

import json
import os
import queue
import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from tests.support.adversarial import GRADESCOPE_ATTACKS, MARKER, with_attack, wrong_everywhere
from autograder.platforms.gradescope import emulate
from autograder.grade.grader import Limits
from autograder.limits import GRADER_ROOM_MB
from autograder.grade.unsealed import run_worker
from tests.support.batches import SLUG, variant_notebook
from tests.support.seal_attacks import FORGED, HIDDEN_SOURCE_MARK, processes_with, seal_attacks, traces

#: The attacks graded through the zip: every attack on the seal, and the older ones that race it
#: (the rest are graded with POSIX separation by `course grade --sandbox posix` in test_seal.py,
#: which is the same seal without a container's start-up for each).
THROUGH_THE_ZIP = {a["name"] for a in seal_attacks()} | {
    "forges_result_messages_and_values", "kills_the_grader", "memory_split_over_children", "bounded_process_flood"}
#: Graded with no control group of their own (COURSE_CGROUP=off), as in Gradescope's containers, where
#: memory no /proc reading shows is stopped by the container's kernel and counted from its OOM kills;
#: with the complete sample, which must keep full marks there too. The rest are kernel-counted. All go
#: two at once, each in a container of its own, as two Gradescope containers on one host would.
#: Every upload runs in a container of Gradescope's default memory (Autograder Settings), which holds
#: the grader and the submission together: the zip cuts its memory limit to leave the grader room.
CONTAINER_MB = 768
SUBMISSION_MB = 768 - GRADER_ROOM_MB
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
    once, each with its own sandbox uids, in a container of CONTAINER_MB (one container each on
    Gradescope). The zip is checked from a private folder, as `course gradescope-check` demands."""
    private = tmp_path_factory.mktemp("gradescope_zip")
    private.chmod(0o700)
    zip_path = Path(shutil.copy(layout.autograder_zip(SLUG), private))
    uid_bases = queue.Queue()  # one per worker: two graders with one uid would kill each other's processes
    for base in (64100, 64110):
        uid_bases.put(base)

    def run(name):
        base = uid_bases.get()
        env = {"COURSE_SANDBOX_UID_BASE": str(base), **({"COURSE_CGROUP": "off"} if name in WITHOUT_CGROUPS else {})}
        try:
            return name, emulate(zip_path, uploads[name], env=env, memory_mb=CONTAINER_MB)
        finally:
            uid_bases.put(base)

    with ThreadPoolExecutor(max_workers=2) as pool:  # those without control groups first: they take longest
        results = dict(pool.map(run, sorted(uploads, key=lambda name: (name not in WITHOUT_CGROUPS, name))))
    # processes the grader left behind end with the container once results.json is written, on
    # Gradescope as here: worth a look in the summary, not a wrong grade
    left = {name: result["_left_running"] for name, result in results.items() if result["_left_running"]}
    if left:
        warnings.warn(f"the autograder left processes running in the container: {left}")
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


def test_every_upload_is_graded_within_the_container_s_memory(gradescope):
    """Past the container's memory its kernel would kill a process, perhaps the grader, and no
    results.json would be written: every upload that was graded has the cut limit, and a result."""
    graded = {name: r for name, r in gradescope.items() if "limits" in r.get("extra_data", {})}
    assert len(graded) == len(gradescope) - 1  # all but the upload refused before grading
    for name, result in graded.items():
        assert result["extra_data"]["limits"]["memory_mb"] == SUBMISSION_MB, (name, result["extra_data"])


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
    assert f"more than {SUBMISSION_MB} MB" in attacks["attack:memory_in_memfds"]["output"]
    for name in ("memory_in_socket_buffers", "memory_in_memfds_in_flight"):  # counted with no control group
        assert "Status: memory." in attacks[f"attack:{name}"]["output"], attacks[f"attack:{name}"]["output"]
    # the container's 512 MB of memory counts the files in its in-memory folders too, so a run that
    # writes too much is stopped by whichever limit it reaches first (test_seal.py grades these two
    # with POSIX separation at course grade's limits, where only the disk count can stop them; the
    # process flood below is stopped for its processes in test_sealed_grading.py)
    for name in ("disk_in_many_files", "disk_past_path_max"):
        stopped = attacks[f"attack:{name}"]["output"]
        assert "all its files together" in stopped or f"more than {SUBMISSION_MB} MB of memory" in stopped, stopped
    assert "tampered" in attacks["attack:leaks_tests_through_every_field_it_writes"]["output"]
    assert traces() == []
    flood = attacks["attack:bounded_process_flood"]["output"]  # 64 processes hold more than 512 MB
    assert "processes" in flood or f"more than {SUBMISSION_MB} MB of memory" in flood, flood
    assert f"more than {SUBMISSION_MB} MB" in attacks["attack:memory_split_over_children"]["output"]
    assert processes_with(MARKER) == [] and processes_with("course_runner.py") == []


def test_an_upload_that_is_not_one_notebook_is_refused_with_a_reason(gradescope):
    results = gradescope["two_notebooks"]
    assert results["score"] == 0 and "could not be graded" in results["output"], results["output"]


def test_a_check_s_own_error_reaches_its_caller_while_another_check_runs(root_only, tmp_path, monkeypatch):
    """Two checks share the /autograder mount point; the one that ends first must still raise its
    own error (an error there once vanished, and the check went on without its results)."""
    from autograder.platforms.gradescope import _mount_point
    from autograder.sandbox import uids

    locks = tmp_path / "locks"  # its own lock: a real check running beside the suite is left alone
    locks.mkdir(mode=0o700)
    monkeypatch.setattr(uids, "lock_folder", lambda: locks)
    folder = tmp_path / "autograder"
    with _mount_point(folder):  # the other check, still running
        with pytest.raises(RuntimeError, match="the check's own error"):
            with _mount_point(folder):
                raise RuntimeError("the check's own error")
        assert folder.is_dir()  # the other check still has its mount point
    assert not folder.exists()  # the last one out removes what the checks made
