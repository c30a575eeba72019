"""The seal under attack: nothing of a submission outlives its run, outgrows its limits, speaks
for the grader or quotes a hidden test, with bubblewrap and with POSIX separation.

The attacks of ``seal_attacks.py`` are graded in the suite's batch (bubblewrap here), in a batch of
their own forced to POSIX separation (``course grade --sandbox posix``, as on Gradescope's and
Docker's hosts), and through the Gradescope emulation (``test_gradescope.py``, POSIX as well).
"""

import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

from tests.support.adversarial import make_attacks, with_attack
from autograder.grade.grader import Grader
from autograder.layout import Layout
from tests.support.batches import BATCH_LIMITS, SLUG
from tests.support.seal_attacks import FORGED, HIDDEN_SOURCE_MARK, row_problems, seal_attacks, traces

ATTACKS = seal_attacks()
#: The older attacks graded with POSIX separation too (the ones that read files or the network are
#: left out: a POSIX-separated submission reads what is world-readable, such as a test machine's
#: checkout, which `course grade` refuses to grade beside; `test_gradescope.py` grades others).
POSIX_TOO = ("patches_the_golden_primitive_and_allclose", "patches_otters_test_machinery", "exits_the_kernel",
             "calls_sys_exit", "prints_50_mb", "snoops_on_proc")


def check_rows(rows: dict, feedback: Path, prefix: str) -> None:
    for attack in ATTACKS:
        row = rows[f"{prefix}{attack['name']}.ipynb"]
        text = (feedback / f"{row['submission']}.txt").read_text()
        assert row_problems(attack, row, text) == [], attack["name"]
    for path in feedback.iterdir():  # no feedback, of any submission, quotes the tests
        text = path.read_text()
        assert HIDDEN_SOURCE_MARK not in text and FORGED not in text, (path.name, text[:2000])


def test_seal_attacks_with_bubblewrap_score_nothing_and_leave_nothing(graded):
    rows, out = graded
    check_rows(rows, out / "feedback", "adversarial/")
    assert rows["adversarial/memory_in_memfds.ipynb"]["status"] == "memory"
    assert "all its files together" in rows["adversarial/disk_in_many_files.ipynb"]["message"]
    assert "all its files together" in rows["adversarial/disk_past_path_max.ipynb"]["message"]
    assert traces() == []


@pytest.fixture(scope="module")
def posix_graded(submissions, tmp_path_factory):
    """The seal attacks and two honest notebooks graded by ``course grade --sandbox posix``, two at a
    time, from a course folder only root can read (the seal refuses to start otherwise), with the
    limits of the batch that grades them under bubblewrap."""
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("POSIX separation needs root (a uid to drop to)")
        pytest.skip("POSIX separation needs root")
    folder, _, paths = submissions
    private = tmp_path_factory.mktemp("posix_course")
    private.chmod(0o700)
    course = private / "course"
    (course / "out" / "autograders").mkdir(parents=True)
    (course / "solutions").mkdir()
    (course / "helpers").mkdir()
    shutil.copy(paths["autograder_zip"], course / "out" / "autograders" / paths["autograder_zip"].name)
    subs = private / "submissions"
    subs.mkdir()
    shutil.copy(folder / "samples" / "complete.ipynb", subs / "complete.ipynb")
    blank = nbformat.read(folder / "samples" / "blank.ipynb", as_version=4)
    nbformat.write(blank, subs / "blank.ipynb")
    for attack in ATTACKS:
        nbformat.write(with_attack(blank, attack["cell"]), subs / f"{attack['name']}.ipynb")
    older = make_attacks({**paths, "repo": course, "submissions": subs, "results": private / "results"})
    for attack in older:
        if attack["name"] in POSIX_TOO:
            nbformat.write(with_attack(blank, attack["cell"]), subs / f"{attack['name']}.ipynb")
    out = private / "results"
    umask = os.umask(0o077)  # a root grader's strict umask: every folder the uid needs gets its mode explicitly
    try:
        rows = Grader(Layout(course), subs, out, BATCH_LIMITS[SLUG], jobs=2,
                      sandbox_mode="posix").run(log=lambda *a: None)
    finally:
        os.umask(umask)
    return {row["file"]: row for row in rows}, out


def test_seal_attacks_with_posix_separation_score_nothing_and_leave_nothing(posix_graded):
    rows, out = posix_graded
    assert all(row["sandbox"].startswith("posix") for row in rows.values())
    check_rows(rows, out / "feedback", "")
    for attack in make_attacks({"repo": Path("c"), "autograder_zip": Path("z"), "submissions": Path("s"),
                                "results": Path("r"), "host_marker": Path("m"), "port": 0}):
        if attack["name"] in POSIX_TOO:
            row = rows[f"{attack['name']}.ipynb"]
            assert row["status"] in attack["expect"] and row["total"] == 0, (attack["name"], row["message"])
            assert "BREACH" not in row["message"], row["message"]
    honest = rows["complete.ipynb"]
    assert honest["status"] == "ok" and honest["total"] == honest["possible"], honest
    assert rows["memory_in_memfds.ipynb"]["status"] == "memory"
    assert rows["memory_in_shared_memory_files.ipynb"]["status"] == "memory"
    assert "all its files together" in rows["disk_in_many_files.ipynb"]["message"]
    assert "all its files together" in rows["disk_past_path_max.ipynb"]["message"]
    assert traces() == []


def test_gradescope_check_refuses_a_zip_the_sandbox_uid_could_read(tmp_path):
    """Under POSIX separation the submission shares the file system: a world-readable zip would
    hand it the golden values, so the check refuses, as `course grade` does, and says what to do."""
    from autograder.platforms.gradescope import emulate
    from autograder.layout import CourseError

    if os.geteuid() != 0:
        pytest.skip("the Gradescope emulation needs root")
    shared = Path(tempfile.mkdtemp(prefix="course-shared-"))  # world-readable, as a checkout often is
    try:
        shared.chmod(0o755)
        (shared / "some-autograder.zip").write_bytes(b"PK")
        (shared / "upload.ipynb").write_text("{}")
        (shared / "upload.ipynb").chmod(0o600)
        with pytest.raises(CourseError, match="chmod o-rwx") as refused:
            emulate(shared / "some-autograder.zip", shared / "upload.ipynb")
        assert "some-autograder.zip" in str(refused.value) and "upload.ipynb" not in str(refused.value)
    finally:
        shutil.rmtree(shared)
