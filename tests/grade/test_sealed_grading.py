"""Sealed grading: what a submission can do against ``course grade``, and what it cannot.

The adversarial submissions (``adversarial.py``) are graded in the suite's one batch (conftest.py):
each starts from the blank student notebook, so any point it scores was stolen.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from tests.support.adversarial import MARKER, make_attacks
from tests.support.seal_attacks import processes_with
from autograder.grade.grader import Grader, Limits
from autograder.layout import CourseError
from autograder.sandbox.uids import SANDBOX_UID_BASE
from tests.support.batches import REPO, SLUG, variant_notebook

ATTACKS = make_attacks({"repo": REPO, "autograder_zip": Path("zip"), "submissions": Path("s"), "results": Path("r"),
                        "host_marker": Path("m"), "port": 0})  # names and expectations only


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a["name"])
def test_attack_gets_its_row_reaches_nothing_and_scores_no_points(graded, attack):
    row = graded[0][f"adversarial/{attack['name']}.ipynb"]
    assert row["status"] in attack["expect"], (row["status"], row["message"])
    assert "BREACH" not in row["message"], row["message"]
    assert row["total"] == 0, (row["scores"], row["message"])  # the blank notebook's score
    assert row["possible"] == graded[0]["samples/complete.ipynb"]["possible"]


def test_honest_submissions_in_the_same_batch_are_unaffected(graded):
    rows = graded[0]
    for name in ("samples/complete.ipynb", "samples/complete_export.zip", "variants/correct_alternatives_1.ipynb"):
        assert rows[name]["status"] == "ok" and rows[name]["total"] == rows[name]["possible"], rows[name]


def test_dead_kernels_and_limits_say_what_happened(graded):
    rows = graded[0]
    assert "exited with code 3" in rows["adversarial/exits_the_kernel.ipynb"]["message"]
    assert "killed by signal 9" in rows["adversarial/kills_its_kernel.ipynb"]["message"]
    assert "stopped before it finished" in rows["adversarial/kills_the_grader.ipynb"]["message"]
    split = rows["adversarial/memory_split_over_children.ipynb"]
    assert split["status"] == "memory" and "all its processes together" in split["message"], split["message"]
    flood = rows["adversarial/bounded_process_flood.ipynb"]
    assert "processes" in flood["message"], flood["message"]
    assert rows["adversarial/sleeps.ipynb"]["status"] == "timeout"


def test_malformed_and_path_climbing_submissions_are_invalid_with_a_reason(graded):
    rows = graded[0]
    assert "not an assignment name" in rows["adversarial/climbs_to_a_planted_autograder.ipynb"]["message"]
    assert "unsafe path" in rows["adversarial/dotdot_paths.zip"]["message"]
    assert "symbolic link" in rows["adversarial/symlink_out.zip"]["message"]
    assert "2 notebooks" in rows["adversarial/two_notebooks.zip"]["message"]
    assert "0 notebooks" in rows["adversarial/empty.zip"]["message"]


def test_nothing_outside_the_results_folder_changes(graded, submissions, listener):
    _, _, paths = submissions
    assert not paths["host_marker"].exists()
    assert paths["digest_after_grading"] == paths["digest_before"]
    assert listener.connections == 0
    assert outboxes_left() == []


def outboxes_left() -> list[str]:
    """The runner's outbox files left in any grading workspace: each lives in its run's private temp
    folder (bubblewrap: in memory; POSIX: under a course-grade-* workspace), removed with the run."""
    found = []
    for top in {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}:
        for workspace in Path(top).glob("course-grade-*"):
            for folder, _, files in os.walk(workspace):
                found += [os.path.join(folder, name) for name in files if name.startswith("course-outbox")]
    return found


def test_no_process_survives_the_run(graded):
    assert processes_with(MARKER) == []
    assert processes_with("course_runner.py") == []
    if os.geteuid() == 0:
        sandbox_uids = {SANDBOX_UID_BASE + n for n in range(64)}  # the ranges runs claim
        left = [p.name for p in Path("/proc").glob("[0-9]*") if p.exists() and p.stat().st_uid in sandbox_uids
                and not is_zombie(p)]
        assert left == []


def is_zombie(proc: Path) -> bool:
    """An exited process not yet reaped: bwrap's reaper can outlive its parent and wait for the
    host's init to collect it, running nothing and holding nothing but its process number."""
    try:
        return "\nState:\tZ" in (proc / "status").read_text()
    except OSError:
        return True  # gone already


def test_printed_floods_are_capped_and_feedback_stays_small(graded):
    rows, out = graded
    assert (out / "results.csv").stat().st_size < 200_000
    assert all(p.stat().st_size < 100_000 for p in (out / "feedback").iterdir())


def test_without_bubblewrap_grading_says_how_to_fix_the_set_up_never_to_grade_unsealed(layout, tmp_path, monkeypatch):
    """As root, POSIX separation takes over where bubblewrap cannot start; it refuses while a
    submission could read the golden values (the bundle is world-readable) and says what to do."""
    (tmp_path / "subs").mkdir()
    shutil.copy(REPO / "notebooks" / SLUG / f"{SLUG}.ipynb", tmp_path / "subs" / "a.ipynb")
    monkeypatch.setattr("autograder.sandbox.bubblewrap.bwrap_binary", lambda: "/bin/false")
    with pytest.raises(CourseError) as refused:
        Grader(layout, tmp_path / "subs", tmp_path / "out", Limits(timeout=30)).run(log=lambda *a: None)
    message = str(refused.value)
    assert "--unsafe" not in message and "unsealed" not in message
    if os.geteuid() == 0:
        assert "chmod o-rwx" in message and str(layout.solutions) in message, message
    else:
        assert "user namespaces" in message, message


def test_a_private_tmpdir_does_not_stop_sealed_grading(layout, fresh_notebooks, tmp_path, monkeypatch):
    """TMPDIR=/scratch/$USER (0700) as clusters set it: the sandbox's uid could not reach a staging
    folder there, so the run keeps its shared files in a temp folder that uid can traverse."""
    import tempfile as tempfile_module

    private = tmp_path / "private-tmp"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile_module, "tempdir", None)  # re-read TMPDIR
    (tmp_path / "subs").mkdir()
    shutil.copy(fresh_notebooks / SLUG / f"{SLUG}.ipynb", tmp_path / "subs" / "blank.ipynb")
    rows = Grader(layout, tmp_path / "subs", tmp_path / "out", Limits(timeout=60)).run(log=lambda *a: None)
    assert rows[0]["status"] in ("ok", "error") and "sandbox" in rows[0], rows[0]
    assert "Permission denied" not in rows[0]["message"], rows[0]["message"]
    assert rows[0]["possible"] > 0 and rows[0]["questions"]


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/python3").exists(),
                    reason="needs root to become an unprivileged user, and a system python3 that user can run")
def test_an_unprivileged_user_can_start_the_sandbox():
    """The non-root path: bwrap makes a user namespace as that user; the process limit holds."""
    tmp_path = Path(tempfile.mkdtemp(prefix="sandbox-as-nobody-"))  # pytest's tmp folders are private to root
    try:
        run_probe_as_nobody(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def run_probe_as_nobody(tmp_path: Path) -> None:
    copy = tmp_path / "lib" / "autograder"
    (copy / "sandbox").mkdir(parents=True)
    # the sandbox, its seal, what it measures, its streams and the protocol it shares with the runner
    for module in ("seal.py", "bubblewrap.py", "holdings.py", "uids.py", "streams.py", "protocol.py",
                   "runner.py", "cgroups.py"):
        shutil.copy(REPO / "autograder" / "sandbox" / module, copy / "sandbox" / module)
    shutil.copy(REPO / "autograder" / "limits.py", copy / "limits.py")
    shutil.copytree(REPO / "autograder" / "templates", copy / "templates")  # the seal renders its lifeline
    shutil.copy(REPO / "helpers" / "core" / "contract.py", copy.parent / "course_contract.py")  # as the session copies it
    (copy / "__init__.py").write_text("")
    (copy / "sandbox" / "__init__.py").write_text("")
    from autograder.sandbox.bubblewrap import _reachable_copy, bwrap_binary
    bwrap = _reachable_copy(Path(bwrap_binary()), tmp_path / "bwrap")  # wherever the venv lies, nobody can run this
    script = tmp_path / "probe.py"
    script.write_text(f"""
import sys, os, tempfile
from pathlib import Path
sys.path.insert(0, {str(tmp_path / 'lib')!r})
from autograder.limits import SandboxLimits
from autograder.sandbox.bubblewrap import BubblewrapSeal
sandbox = BubblewrapSeal(python=Path("/usr/bin/python3"), staging=Path(tempfile.mkdtemp()), bwrap={bwrap!r})
sandbox.probe()
flood = "import subprocess, time\\nfor _ in range(40): subprocess.Popen(['sleep', '30'])\\ntime.sleep(30)"
with sandbox.lease() as uid:
    run = sandbox.run(["/usr/bin/python3", "-c", flood], binds=[], env={{"PATH": "/usr/bin"}}, uid=uid,
                      limits=SandboxLimits(timeout=20, processes=10))
print("uid", os.getuid(), "killed_for", run.killed_for, "| memory counted at a kill:", run.memory_parts)
""")
    for path in (tmp_path, tmp_path / "lib", copy, copy / "sandbox", copy / "templates"):
        path.chmod(0o755)
    for path in (script, copy.parent / "course_contract.py", *copy.rglob("*.py"), *copy.rglob("*.tmpl")):
        path.chmod(0o644)
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", str(script)],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "uid 65534 killed_for processes" in done.stdout, done.stdout


def gone_within(text: str, seconds: float) -> list[str]:
    """The processes still running with ``text`` in their command line once ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while (left := processes_with(text)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_a_grader_killed_where_die_with_parent_did_not_act_leaves_no_process():
    """--die-with-parent has a gap (a grader killed while bwrap is still starting). Here bwrap runs
    without it, as if that had happened: the lifeline watcher alone must end the sandbox."""
    marker = f"lifeline-{os.getpid()}"
    staging = Path(tempfile.mkdtemp(prefix="course-lifeline-"))  # in /tmp: a sandbox uid can reach it
    staging.chmod(0o755)
    script = f"""
import sys, tempfile
from pathlib import Path
sys.path.insert(0, {str(REPO)!r})
from autograder.limits import SandboxLimits
from autograder.sandbox.bubblewrap import BubblewrapSeal
sandbox = BubblewrapSeal(python=Path(sys.executable), staging=Path({str(staging)!r}))
wrapper = Path(sandbox.staging, "bwrap-without-die-with-parent")
wrapper.write_text('#!/bin/sh\\nfor a do shift; [ "$a" = --die-with-parent ] || set -- "$@" "$a"; done\\n'
                   'exec {{}} "$@"\\n'.format(sandbox.bwrap))
wrapper.chmod(0o755)
sandbox.bwrap = str(wrapper)
with sandbox.lease() as uid:
    sandbox.run([sys.executable, "-c", "import time; time.sleep(60)", {marker!r}], binds=[], env={{}}, uid=uid,
                limits=SandboxLimits(timeout=90))
"""
    grader = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("time.sleep(60)" in p for p in processes_with(marker)):
            time.sleep(0.1)
        assert any("time.sleep(60)" in p for p in processes_with(marker)), "the sandboxed process never started"
        grader.send_signal(signal.SIGKILL)
        grader.wait()
        assert gone_within(marker, 10) == []  # without the watcher, the sleep would last 60 s
    finally:
        grader.kill()
        shutil.rmtree(staging, ignore_errors=True)


def test_killed_grader_leaves_no_sandbox_and_a_rerun_ends_with_one_row_each(layout, fresh_notebooks, tmp_path):
    """SIGKILL `course grade` midway: its sandboxes die with it; the rerun grades only what is missing."""
    subs = tmp_path / "subs"
    subs.mkdir()
    blank = nbformat.read(fresh_notebooks / SLUG / f"{SLUG}.ipynb", as_version=4)
    for i in range(6):
        blank.metadata["copy"] = i  # different bytes: six submissions
        nbformat.write(blank, subs / f"student{i}.ipynb")
    out = tmp_path / "results"
    command = [sys.executable, "-m", "autograder.cli", "grade", str(subs), "--out", str(out), "--jobs", "2",
               "--timeout", "60"]
    grader = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list((out / "rows").glob("*.json"))) < 2:
        time.sleep(0.2)
    grader.send_signal(signal.SIGKILL)
    grader.wait()
    done_before = {p.name for p in (out / "rows").glob("*.json")}
    assert 2 <= len(done_before) < 6
    assert gone_within("course_runner.py", 10) == []  # --die-with-parent, or the lifeline watcher
    for row in (out / "rows").glob("*.json"):  # rows are written atomically: each one whole
        assert json.loads(row.read_text())["status"]
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{len(done_before)} submission(s) already graded" in again.stdout + again.stderr
    rows = (out / "results.csv").read_text().strip().splitlines()[1:]
    assert sorted(r.split(",")[0] for r in rows) == [f"student{i}.ipynb" for i in range(6)]
    assert processes_with("course_runner.py") == []


def test_the_autograder_zip_still_grades_under_plain_otter(layout, submissions, graded):
    """Gradescope and `otter run` use the same zip: golden values compared inside the kernel, the
    same scores as the sealed run."""
    from autograder.grade.unsealed import run_worker
    from tests.kernel_attention_variants import WRONG

    folder, _, _ = submissions
    notebook = variant_notebook(next(v for v in WRONG if v["name"] == "softmax_missing_sqrt_d"))
    wrong = run_worker(folder / "variants" / f"{notebook}.ipynb", layout.autograder_zip(SLUG),
                       Limits(timeout=120, memory_mb=3072))
    assert wrong["status"] == "ok", wrong["message"]
    softmax = wrong["questions"]["q1_softmax"]
    assert 0 < softmax["possible"] and softmax["score"] < softmax["possible"]
    sealed = graded[0][f"variants/{notebook}.ipynb"]["scores"]
    assert {q: result["score"] for q, result in wrong["questions"].items()} == sealed
    assert any(score > 0 for score in sealed.values())


def test_the_same_attacks_succeed_without_the_sandbox(layout, submissions, tmp_path):
    """The control: under --unsafe (plain otter in the grader's account) the read and network
    attacks do reach their targets, so the sealed run above shows the sandbox at work, not a dud attack."""
    from tests.support.adversarial import Listener, with_attack

    folder, _, paths = submissions
    listener = Listener()
    try:
        attacks = {a["name"]: a for a in make_attacks({**paths, "port": listener.port})}
        blank = nbformat.read(folder / "samples" / "blank.ipynb", as_version=4)
        (tmp_path / "subs").mkdir()
        for name in ("reads_hidden_tests_and_golden_values", "opens_a_network_connection"):
            nbformat.write(with_attack(blank, attacks[name]["cell"]), tmp_path / "subs" / f"{name}.ipynb")
        rows = Grader(layout, tmp_path / "subs", tmp_path / "out", Limits(timeout=120, memory_mb=3072), jobs=2,
                      unsafe=True).run(log=lambda *a: None)
    finally:
        listener.close()
    assert all("BREACH" in row["message"] for row in rows), [row["message"] for row in rows]
    assert listener.connections >= 1


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: the sandbox's uid then differs from the grader's")
def test_a_bwrap_the_sandbox_uid_cannot_reach_is_copied_where_it_can(tmp_path):
    """CI may clone the bundle (and its virtual environment) under /root, which is private."""
    from autograder.sandbox.bubblewrap import BubblewrapSeal, bwrap_binary
    from autograder.sandbox.choose import close_seal

    package = Path(bwrap_binary()).parents[1]
    private = tmp_path / "private"  # pytest's tmp folders are 0700, like /root
    shutil.copytree(package, private / package.name)
    shutil.copytree(package.with_name(f"{package.name}.libs"), private / f"{package.name}.libs")
    staging = Path(tempfile.mkdtemp(prefix="staging-"))
    sandbox = None
    try:
        staging.chmod(0o755)
        sandbox = BubblewrapSeal(python=Path(sys.executable), staging=staging,
                          bwrap=str(private / package.name / "_bin" / "bwrap"))
        assert Path(sandbox.bwrap).is_relative_to(staging)
        sandbox.probe()
    finally:
        close_seal(sandbox)  # its uids, for the graders after it
        shutil.rmtree(staging, ignore_errors=True)
