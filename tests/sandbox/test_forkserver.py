"""Kernels started warm by the fork server (POSIX separation, as root): each is a process of its
run like an exec'd one (the run's uid, control groups, namespaces and limits, no capability, no
way back to the server) and starts with torch already imported; the server forks one per run and
tells the runner how it ended."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograder.autograder_zip import Autograder
from autograder.limits import SandboxLimits
from autograder.sandbox import forkserver
from autograder.sandbox.forkserver import ForkServer, enter_sandbox
from autograder.sandbox.posix import PosixSeal
from autograder.sandbox.protocol import HF_HOME_NOWHERE, KERNEL_NAMESPACES, thread_settings
from autograder.sandbox.session import WARM_KERNELS_ENV, SandboxPool
from autograder.sandbox.uids import UidPool, kill_uid

pytestmark = pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"),
                                reason="POSIX separation needs root")

#: A cell that reports what the kernel is: what it had imported before its first line ran, who it
#: runs as, and how it compares with the lifeline (a bash of the same run, started by the seal).
PROBE = r"""
import json, os, sys
before = sorted(m for m in ("torch", "numpy", "matplotlib.pyplot", "transformers") if m in sys.modules)
hub = sys.modules.get("huggingface_hub.constants")
def status(pid):
    return dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
def same_run_bash():
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == os.getuid() and \
                    open(f"/proc/{pid}/comm").read().strip() == "bash":
                return pid
        except OSError:
            pass
bash = same_run_bash()
me = status("self")
import torch
torch.ones(64, 64) @ torch.ones(64, 64)  # torch picks its threads at its first parallel operation
print(json.dumps({
    "before": before, "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "caps": {k: me[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")},
    "no_new_privs": me["NoNewPrivs"].strip(),
    "parent_is_runner": os.getppid() > 0 and "course_runner" in open(f"/proc/{os.getppid()}/cmdline").read(),
    "env_has_server": any("FORKSERVER" in k for k in os.environ),
    "torch_threads": torch.get_num_threads(),
    "hf_home": hub and hub.HF_HOME,
    "same_as_bash": {
        "cgroup": open("/proc/self/cgroup").read() == open(f"/proc/{bash}/cgroup").read(),
        "limits": open("/proc/self/limits").read() == open(f"/proc/{bash}/limits").read(),
        **{ns: os.readlink(f"/proc/self/ns/{ns}") == os.readlink(f"/proc/{bash}/ns/{ns}") for ns in ("mnt", "net")},
    },
}))
"""


#: The runs' torch threads in the probes: more than this machine's cores, as the suite's references ask
#: (REFERENCE_THREADS), where a kernel's own choice and the number asked for part.
THREADS = 16


def threads_of_a_fresh_process() -> int:
    """The torch threads a process exec'd with the probes' thread settings ends up with."""
    env = {**os.environ, **thread_settings(THREADS)}
    code = "import torch; torch.ones(64, 64) @ torch.ones(64, 64); print(torch.get_num_threads())"
    return int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)


def probe(monkeypatch, warm: bool, seal: str = "posix", tests_source: str = "") -> dict:
    """What the probe cell saw, run in a grading pool's kernel; ``tests_source``: the hidden tests'
    source its autograder carries (none by default)."""
    monkeypatch.setenv(WARM_KERNELS_ENV, "1" if warm else "0")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(PROBE),
                nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint(plt.get_backend())")]
    assets = Path(tempfile.mkdtemp(prefix="forkserver-assets-"))
    os.chmod(assets, 0o755)
    sources = [{"question": "q1", "source": tests_source}] if tests_source else []
    autograder = Autograder(zip_path=Path("none.zip"), name="probe", tests={}, sources=sources, golden={}, assets=assets)
    try:
        with SandboxPool(1, mode=seal, threads=THREADS) as pool:
            assert (pool.seal.forkserver is not None) == warm
            text, problem = pool.execute(autograder, nbformat.writes(nb), SandboxLimits(timeout=60, memory_mb=2048))
    finally:
        os.rmdir(assets)
    assert text is not None, problem
    cells = nbformat.reads(text, as_version=4).cells
    printed = "".join(o.get("text", "") for o in cells[0].outputs if o.get("output_type") == "stream")
    assert printed, cells[0].outputs
    # course pdf's notebooks show their figures, drawn by Jupyter's inline backend as in an exec'd kernel
    assert [o.get("text") for o in cells[1].outputs if o.get("output_type") == "stream"] == \
        ["module://matplotlib_inline.backend_inline\n"]
    assert any("image/png" in o.get("data", {}) for o in cells[1].outputs), cells[1].outputs
    return json.loads(printed.strip().splitlines()[-1])


@pytest.mark.parametrize("seal", ["posix", "bubblewrap"])
def test_a_warm_kernel_is_a_process_of_its_run_with_torch_already_imported(monkeypatch, seal):
    seen = probe(monkeypatch, warm=True, seal=seal)
    assert seen["before"] == ["matplotlib.pyplot", "numpy", "torch"]
    assert seen["uid"] != 0 and seen["gid"] == seen["uid"] and seen["groups"] == []
    assert set(seen["caps"].values()) == {"0000000000000000"}, seen["caps"]
    assert seen["no_new_privs"] == "1"
    assert not seen["parent_is_runner"]  # the fork server's child, not the runner's
    assert not seen["env_has_server"]
    assert seen["torch_threads"] == threads_of_a_fresh_process()  # not the count asked for, if torch caps it
    assert seen["same_as_bash"] == {"cgroup": True, "limits": True, "mnt": True, "net": True}


def test_kernels_of_an_assignment_whose_tests_load_a_pretrained_model_start_with_its_code_imported(monkeypatch):
    seen = probe(monkeypatch, warm=True, tests_source="def test_q1():\n    model, tokenizer = load_bert()\n")
    assert seen["before"] == ["matplotlib.pyplot", "numpy", "torch", "transformers"]
    # the cache's place transformers read in the server is the one every run's environment names
    assert seen["hf_home"] == HF_HOME_NOWHERE
    assert seen["same_as_bash"] == {"cgroup": True, "limits": True, "mnt": True, "net": True}


@pytest.mark.parametrize("seal", ["posix", "bubblewrap"])
def test_without_the_fork_server_the_kernel_starts_cold_as_before(monkeypatch, seal):
    seen = probe(monkeypatch, warm=False, seal=seal)
    assert seen["before"] == []
    assert seen["parent_is_runner"]
    assert seen["torch_threads"] == threads_of_a_fresh_process()
    assert seen["same_as_bash"] == {"cgroup": True, "limits": True, "mnt": True, "net": True}


@pytest.fixture
def sandbox_uid():
    pool = UidPool(1, [])
    uid = pool.lease()
    yield uid
    kill_uid(uid)
    pool.close()


@pytest.fixture
def open_folder():
    """A folder the sandbox's uid can reach (pytest's own are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="forkserver-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_server_forks_one_kernel_per_run_and_reports_how_it_ended(open_folder, sandbox_uid):
    """A runner's second request is never answered; the kernel runs as the run's uid with nothing
    privileged; its exit status reaches the runner once it is killed."""
    uid, tmp_path = sandbox_uid, open_folder
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, uid, uid)
    script = tmp_path / "course_forkserver.py"
    script.write_bytes(Path(forkserver.__file__).read_bytes())
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    server = ForkServer(sys.executable, script, env).start()
    # a stand-in for the runner, launched as the seal launches one (its uid, limits and namespaces)
    seal = PosixSeal(python=Path(sys.executable), staging=tmp_path, uids=UidPool(0, []))
    limits = SandboxLimits(timeout=60, memory_mb=2048)
    runner = subprocess.Popen(seal.command(["sleep", "60"], [], {}, uid, limits))
    try:
        assert server.wait_ready()
        runner_end, server_end = ForkServer.pair()
        time.sleep(0.5)  # the launcher has dropped to the uid
        server.register(server_end, runner.pid, uid, (uid, uid), [], KERNEL_NAMESPACES)
        server_end.close()
        request = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", str(home / "kernel.json")],
                   "env": {**env, "HOME": str(home)}, "cwd": str(home)}
        devnull = os.open(os.devnull, os.O_RDONLY)
        # what the runner sends: its streams and its namespaces (here the stand-in's)
        fds = [devnull] * 3 + [os.open(f"/proc/{runner.pid}/ns/{name}", os.O_RDONLY) for name in KERNEL_NAMESPACES]
        socket.send_fds(runner_end, [json.dumps(request).encode()], fds)
        runner_end.settimeout(60)
        kernel = json.loads(runner_end.recv(4096))["pid"]
        status = dict(line.split(":", 1) for line in Path(f"/proc/{kernel}/status").read_text().splitlines())
        assert status["Uid"].split() == [str(uid)] * 4 and status["Gid"].split() == [str(uid)] * 4
        assert status["NoNewPrivs"].strip() == "1" and status["Groups"].strip() == ""
        assert {int(status[c], 16) for c in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {0}
        socket.send_fds(runner_end, [json.dumps(request).encode()], fds)  # a second one
        for fd in fds[2:]:
            os.close(fd)
        assert json.loads(runner_end.recv(4096)) == {"error": "a run gets one kernel"}
        assert Path(f"/proc/{kernel}").exists()
        os.kill(kernel, 9)
        assert json.loads(runner_end.recv(4096)) == {"exit": -9}
        assert runner_end.recv(4096) == b""  # the server let go of the run
    finally:
        runner.kill()
        runner.wait()
        server.close()
        seal.uids.close()  # its pool made this process the orphans' reaper until then
    assert server.proc.returncode == 0


def test_a_kernel_is_never_forked_for_root_or_for_a_process_that_is_not_the_run_s(sandbox_uid):
    own = [os.open(f"/proc/self/ns/{name}", os.O_RDONLY) for name in KERNEL_NAMESPACES]
    try:
        run = {"pid": os.getpid(), "uid": sandbox_uid, "become": [0, 0], "groups": [], "namespaces": KERNEL_NAMESPACES}
        with pytest.raises(PermissionError, match="never runs as root"):
            enter_sandbox(run, own)
        with pytest.raises(PermissionError, match="is not the run's runner"):  # this test runs as root
            enter_sandbox({**run, "become": [sandbox_uid, sandbox_uid]}, own)
        with pytest.raises(ValueError, match="wrong namespaces"):
            enter_sandbox({**run, "become": [sandbox_uid, sandbox_uid]}, own[:3])
    finally:
        for fd in own:
            os.close(fd)
