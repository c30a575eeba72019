"""Limits that measure what they name: memory is what a submission's processes hold, never the
address space torch reserves; running out of it, in a cell or in a test, is reported as such."""

import os
import sys
import time
from pathlib import Path

import pytest

from autograder.limits import SandboxLimits, address_space_backstop_mb
from autograder.sandbox.seal import SandboxRun
from autograder.sandbox.bubblewrap import BubblewrapSeal
from autograder.autograder_zip import Autograder
from autograder.judge.verdicts import verdict

AUTOGRADER = Autograder(zip_path=Path("a.zip"), name="a",
                        tests={"q1": [{"test": "test_big", "points": 2, "hidden": True}]}, sources=[],
                        golden={"big/value": {"test": "test_big", "check": "between", "low": 0, "high": 1}},
                        assets=Path("."))


def run_with(test_error: str, first_error=None) -> SandboxRun:
    return SandboxRun(messages=[
        {"event": "cells_done", "first_error": first_error, "kernel_died": None},
        {"event": "test", "question": "q1", "test": "test_big", "passed": False, "error": test_error, "values": []},
        {"event": "done"}])


def test_running_out_of_memory_inside_a_test_makes_the_row_memory_and_names_the_test():
    for error in ("MemoryError: ", "RuntimeError: Cannot allocate memory (os error 12)",
                  "RuntimeError: [enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: not enough memory"):
        result = verdict(run_with(error), AUTOGRADER, SandboxLimits())
        assert result["status"] == "memory", (error, result)
        assert "test_big" in result["message"] and "out of memory" in result["message"]
        assert result["questions"]["q1"]["score"] == 0


def test_an_ordinary_failing_test_is_no_memory_problem():
    result = verdict(run_with("AssertionError: shapes differ"), AUTOGRADER, SandboxLimits())
    assert result["status"] == "ok" and result["questions"]["q1"]["score"] == 0


def test_a_cell_short_of_memory_is_named():
    error = {"cell": "model = load_gpt()", "index": 3, "ename": "MemoryError", "evalue": "os error 12"}
    result = verdict(run_with("", first_error=error), AUTOGRADER, SandboxLimits())
    assert result["status"] == "memory" and "load_gpt" in result["message"]


def test_the_address_space_cap_is_a_backstop_far_above_the_memory_limit():
    limits = SandboxLimits(memory_mb=3072)
    backstop = address_space_backstop_mb(limits.memory_mb)
    assert backstop >= 8 * limits.memory_mb
    assert backstop >= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    sandbox = BubblewrapSeal.__new__(BubblewrapSeal)  # the command line only: no bwrap needed
    sandbox.bwrap, sandbox.as_root, sandbox.system_binds, sandbox.binds = "bwrap", False, [], []
    sandbox.staging = Path("/nonexistent")
    command = sandbox.command([sys.executable], [], {}, 0, limits)
    assert f"--as={backstop << 20}" in command and f"--as={limits.memory_mb << 20}" not in command


def test_the_demo_calls_a_reference_short_of_full_marks_unexpected():
    from autograder.demo import unexpected

    def row(name, status, total, possible=10):
        return {"submission": name, "status": status, "total": total, "possible": possible, "message": "",
                "questions": {"q1": {"score": total, "possible": possible}}}

    expected = {"a__complete.ipynb": ("ok",), "a__complete_export.zip": ("ok",), "a__partial.ipynb": ("ok", "error")}
    fine = [row("a__complete.ipynb", "ok", 10), row("a__complete_export.zip", "ok", 10), row("a__partial.ipynb", "ok", 4)]
    assert unexpected(fine, expected) == []
    short = [row("a__complete.ipynb", "ok", 6), *fine[1:]]  # the demo of issue 26: status ok, 4 points gone
    assert unexpected(short, expected) == ["a__complete.ipynb: the reference scored 6/10 (q1 6/10)"]
    assert unexpected(fine[:2], expected) == ["a__partial.ipynb: no row"]
    assert "status timeout" in unexpected([row("a__complete.ipynb", "timeout", 0), *fine[1:]], expected)[0]


def test_two_graders_on_one_machine_never_share_a_sandbox_uid():
    """A POSIX-separated run kills every process of its uids: a second grader (course pdf beside
    course grade, two courses) must get other uids, and the first one's come free when it ends."""
    import pytest

    from autograder.sandbox.uids import claim_uids

    if os.geteuid() != 0:
        pytest.skip("sandbox uids are claimed only when the grader is root")
    held = claim_uids(2)
    held_too = claim_uids(2)
    assert {uid for uid, _ in held}.isdisjoint(uid for uid, _ in held_too)
    for _, fd in held:
        os.close(fd)
    held_again = claim_uids(2)
    assert [uid for uid, _ in held_again] == [uid for uid, _ in held]
    for _, fd in held_too + held_again:
        os.close(fd)


def test_a_pool_reaps_the_orphans_its_runs_leave_instead_of_waiting_for_init():
    """bwrap's launcher exits before its PID-namespace init, and under POSIX separation the lifeline's
    shell outlives its parent: such an orphan is the grader's own child while a pool is open, and its
    zombie is reaped at once (init reaped them 1.3 to 1.8 s late here, and the uid could not be given
    back until then). Once the last pool closes, orphans go to init again."""
    import subprocess

    from autograder.sandbox.uids import Adoption, claim_uids, reap_adopted
    from autograder.sandbox.holdings import processes_of

    if os.geteuid() != 0:
        pytest.skip("sandbox uids are claimed only when the grader is root")
    assert not Adoption.active(), "a pool an earlier test opened in this process was never closed"
    (uid, fd), = claim_uids(1)

    def orphan() -> tuple[int, str]:
        """(pid, parent) of a process of ``uid`` whose parent exited first, once it has exited too."""
        done = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "sh", "-c",
                               "sleep 0.3 & echo $!"], capture_output=True, text=True, timeout=30)
        pid = int(done.stdout)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
            except OSError:
                return pid, "gone"
            if status["State"].split()[0] == "Z":
                return pid, status["PPid"].strip()
            time.sleep(0.02)
        raise AssertionError("the orphan never exited")

    try:
        Adoption.begin()
        try:
            pid, parent = orphan()
            assert parent == str(os.getpid())  # adopted: ours to reap, not init's
            reap_adopted(uid)
            assert pid not in processes_of(uid, zombies=True)
        finally:
            Adoption.end()
        assert not Adoption.active()
        pid, parent = orphan()
        assert parent != str(os.getpid())  # no pool open: init's again
    finally:
        os.close(fd)


def test_a_run_whose_sandbox_could_not_be_emptied_is_not_judged():
    run = run_with("")
    assert verdict(run, AUTOGRADER, SandboxLimits())["status"] == "ok"
    run.leftovers = ["process 4242 of uid 61000 (python)"]
    result = verdict(run, AUTOGRADER, SandboxLimits())
    assert result["status"] == "error" and "outlived the kill" in result["message"]
    case = result["questions"]["q1"]["cases"][0]
    assert result["questions"]["q1"]["score"] == 0 and not case["passed"] and "not judged" in case["message"]


def test_a_file_read_from_a_shared_cache_is_no_disk_of_the_submission_but_a_deleted_one_is(tmp_path):
    """A model's weights held open while loading are not files the submission wrote (a correct
    visualizing_attention notebook was stopped for 'disk' while its 520 MB model file was open);
    a file it deleted but still holds counts where it lives."""
    import subprocess

    from autograder.sandbox.holdings import Meter

    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\1" * (8 << 20))
    holder = subprocess.Popen([sys.executable, "-c", f"""
import os, sys, time
keep = open({str(weights)!r}, "rb")
scratch = open({str(tmp_path / "scratch.bin")!r}, "wb")
scratch.write(b"x" * (4 << 20)); scratch.flush(); os.fsync(scratch.fileno())
os.unlink({str(tmp_path / "scratch.bin")!r})
print("ready", flush=True)
time.sleep(30)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        held = Meter(None).measure([holder.pid])
        assert 3.9 < held.disk_mb < 6, held  # the deleted 4 MB file only, not the 8 MB one it reads
    finally:
        holder.kill()
        holder.wait()


def test_a_memory_kill_says_what_the_memory_was():
    """An instructor reading 'used more than 4096 MB' can tell a model's pages from files in memory."""
    run = run_with("")
    run.killed_for = "memory"
    run.memory_parts = {"process pages": 310.0, "shared-memory objects and files": 4200.0,
                        "the sandbox's in-memory folders": 1.0}
    result = verdict(run, AUTOGRADER, SandboxLimits())
    assert result["status"] == "memory"
    assert "shared-memory objects and files (4200 MB)" in result["message"], result["message"]


def test_a_mount_that_moved_is_not_counted_as_the_sandbox_s_memory(monkeypatch):
    """The in-memory folders are measured through /proc/<pid>/root: a path that no longer leads to
    the mount mountinfo named (bwrap mid-setup) leads to another file system, perhaps the host's
    disk, whose used space must not count as the sandbox's memory."""
    from autograder.sandbox import holdings
    meter = holdings.Meter(None)
    disk = os.stat("/").st_dev
    named = next(dev for dev in range(1 << 20, 1 << 21) if dev not in meter.host_devices)  # a device of no host mount
    monkeypatch.setattr(holdings, "_mounts", lambda path: {"/": (named, "tmpfs")})  # mountinfo names a tmpfs at /
    assert os.stat(f"/proc/{os.getpid()}/root/").st_dev == disk != named
    assert meter._own_tmpfs(os.getpid()) == {}  # the path leads to /, not to that tmpfs: nothing counted
    monkeypatch.setattr(holdings, "_mounts", lambda path: {"/": (disk, "tmpfs")})
    meter.host_devices = set()  # as if / were the sandbox's own tmpfs: now it is measured
    assert meter._own_tmpfs(os.getpid())[disk][0] > 0


def test_files_past_path_max_are_counted_and_too_deep_folders_stop_the_walk(tmp_path):
    """The meter walks by descriptor: a file under a path far past PATH_MAX counts; a folder nested
    deeper than MAX_DEPTH is reported (the run is stopped for it), never silently skipped."""
    from autograder.sandbox import holdings
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    for level in range(20):  # 20 x 255 characters: 5,100, past PATH_MAX (4,096)
        os.mkdir("d" * 255, dir_fd=fd)
        inner = os.open("d" * 255, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    out = os.open("deep-file", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
    os.write(out, b"x" * (1 << 20))
    os.close(out)
    found: dict = {}
    assert not holdings.walk_owned(os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY), {os.getuid()}, found)
    assert len(found) == 21 and sum(found.values()) >= 1 << 20  # 20 folders and the file
    for level in range(holdings.MAX_DEPTH + 5):
        os.mkdir("e", dir_fd=fd)
        inner = os.open("e", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    assert holdings.walk_owned(os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY), {os.getuid()}, {})
    from autograder.sandbox.uids import remove_files_of  # and the clean-up removes such a tree whole
    from autograder.sandbox.holdings import owned_entries

    remove_files_of(os.getuid(), [tmp_path])
    assert list(owned_entries({os.getuid()}, [tmp_path])) == []


def cgroup_home():
    """Where this test may make control groups: root on these machines, so CI fails rather than skips."""
    from autograder.sandbox.cgroups import find_home

    home, why = find_home()
    if home is None:
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail(f"no control group on a CI machine run as root: {why}")
        pytest.skip(why)
    return home


def test_a_control_group_counts_socket_buffers_that_no_proc_reading_shows():
    """Where the grader may make a control group (root on these machines: CI fails rather than skips),
    a process that queues 180 MB or more in socket pairs under a 100 MB group is stopped by the kernel, and
    the group is killed and removed."""
    import subprocess

    home = cgroup_home()
    group = home.new_group(f"course-sandbox-{os.getpid()}-test", memory_mb=100, max_tasks=64)
    fill = ("import socket\npairs = []\nfor _ in range(900):  # 900 pairs of at least 200 KB queued each\n"
            "    a, b = socket.socketpair()\n    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)\n"
            "    a.setblocking(False)\n    try:\n        while True:\n            a.send(b'x' * 65536)\n"
            "    except BlockingIOError:\n        pass\n    pairs.append((a, b))\n")
    try:
        done = subprocess.run([*group.join_command(), sys.executable, "-c", fill], capture_output=True, timeout=120)
        assert done.returncode == -9 and group.oom_kills() >= 1, done
        assert group.peak_mb() >= 95
    finally:
        assert group.kill() == [] and group.remove()


def test_killing_a_group_ends_the_processes_of_the_groups_made_inside_it():
    """A grader run inside a group (the emulated Gradescope container) makes its runs' groups inside
    that one: killing and removing the outer group reaches those too."""
    import subprocess

    home = cgroup_home()
    outer = home.new_group(f"course-sandbox-{os.getpid()}-outer", memory_mb=200, max_tasks=64)
    inner = type(outer)(home, [folder / "inner" for folder in outer.folders])
    for folder in inner.folders:
        folder.mkdir()
    sleeper = subprocess.Popen([*inner.join_command(), "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while sleeper.pid not in outer.members() and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = sleeper.pid in outer.members()
        left, removed = outer.kill(), outer.remove()
        ended = sleeper.wait(timeout=10)
    finally:  # whatever failed above, nothing of the test stays behind
        sleeper.kill()
        sleeper.wait(timeout=10)  # a group holding a process that is still exiting cannot be removed
        for folder in inner.folders + outer.folders:
            try:
                folder.rmdir()
            except OSError:
                pass
    assert seen and left == [] and removed and ended == -9, (seen, left, removed, ended)
    assert not any(folder.exists() for folder in outer.folders + inner.folders)


@pytest.mark.parametrize("jobs, threads_per_core", [(1, None), (2, 2)])
def test_a_grading_kernel_keeps_its_threads_and_sleeps_at_once_only_on_shared_cores(tmp_path, jobs, threads_per_core):
    """A grade never depends on the load: the kernel's torch team is fixed either way. Its idle threads
    spin briefly when the jobs' threads fit the cores, and sleep at once when they outnumber them."""
    import subprocess

    from autograder.limits import usable_cores
    from autograder.sandbox import protocol
    from autograder.sandbox.session import SandboxPool

    cores = usable_cores()
    pool = SandboxPool(jobs, threads=threads_per_core and threads_per_core * cores)  # not started: its settings only
    env = protocol.sandbox_environment(str(Path(sys.executable).parent), pool.threads, shared_cores=pool.shared_cores)
    code = "import torch, helpers, os; print(helpers.threading_policy(), os.environ['OMP_WAIT_POLICY'], os.environ['OMP_NUM_THREADS'])"
    done = subprocess.run([sys.executable, "-c", code], env={**env, "HOME": str(tmp_path)}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if threads_per_core:  # 2 jobs of twice the cores each
        assert done.stdout.split() == ["passive", "PASSIVE", str(2 * cores)]
    else:
        assert done.stdout.split() == ["as", "set", "by", "the", "environment", "ACTIVE", str(cores)]
        assert env["GOMP_SPINCOUNT"] == "300000"  # libgomp's default spin: brief, then sleep


def test_a_container_s_memory_is_read_from_inside_it_and_cut_for_the_grader_s_room():
    """The Gradescope zip reads the memory its container allows (the smallest limit on its control
    groups) and leaves the grader GRADER_ROOM_MB of it; outside a container, course grade's limit holds."""
    import subprocess

    from autograder.limits import DEFAULT_LIMITS, GRADER_ROOM_MB, limits_within

    assert limits_within(DEFAULT_LIMITS, None) == DEFAULT_LIMITS
    assert limits_within(DEFAULT_LIMITS, 768).memory_mb == 768 - GRADER_ROOM_MB  # Gradescope's default container
    assert limits_within(DEFAULT_LIMITS, 384).memory_mb == 192  # a tiny one: half of it for each
    assert limits_within(DEFAULT_LIMITS, 16384) == DEFAULT_LIMITS  # a big one: course grade's limits
    home = cgroup_home()
    group = home.new_group(f"course-sandbox-{os.getpid()}-container", memory_mb=700, max_tasks=64)
    read = "from autograder.sandbox.cgroups import memory_allowed_mb; print(memory_allowed_mb())"
    try:
        done = subprocess.run([*group.join_command(), sys.executable, "-c", read], capture_output=True, text=True,
                              timeout=60, cwd=Path(__file__).resolve().parents[2])
        assert done.stdout.split() == ["700"], done
    finally:
        assert group.kill() == [] and group.remove()


def test_a_kill_for_the_container_s_memory_is_counted_from_inside_it():
    """What makes a run ``memory`` where no group of its own can be made: inside a 200 MB container, a
    child that allocates 400 MB is killed by the kernel, and the container's count of such kills rises."""
    import subprocess

    group = cgroup_home().new_group(f"course-sandbox-{os.getpid()}-container", memory_mb=200, max_tasks=64)
    inside = ("import subprocess, sys\nfrom autograder.sandbox.cgroups import container_oom_kills\n"
              "before = container_oom_kills()\n"
              "hog = subprocess.run([sys.executable, '-c', 'x = bytearray(400 << 20)'])\n"
              "print(hog.returncode, container_oom_kills() - before)")
    try:
        done = subprocess.run([*group.join_command(), sys.executable, "-c", inside], capture_output=True, text=True,
                              timeout=60, cwd=Path(__file__).resolve().parents[2])
        assert done.stdout.split() == ["-9", "1"], done
    finally:
        assert group.kill() == [] and group.remove()


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop needs root")
def test_the_oom_killer_ends_a_sandbox_s_processes_first():
    """Set before the uid drop; where the grader holds CAP_SYS_RESOURCE the run cannot lower it again
    (Docker's root, as on Gradescope and this machine, does not: then the memory limit holds alone)."""
    import subprocess

    from autograder.sandbox.seal import KILLED_FIRST

    script = "cat /proc/self/oom_score_adj; (echo 0 > /proc/self/oom_score_adj) 2>/dev/null && echo lowered || echo refused"
    done = subprocess.run([*KILLED_FIRST, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                           "sh", "-c", script], capture_output=True, text=True, timeout=30)
    effective = int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("CapEff:")), 16)
    may_pin = bool(effective >> 24 & 1)  # CAP_SYS_RESOURCE
    assert done.stdout.split() == ["1000", "refused" if may_pin else "lowered"], done
