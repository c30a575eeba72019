"""What the grader and the sandbox runner agree on, in one module (standard library only).

The grader (:mod:`autograder.sandbox.session`) copies this file into the sandbox beside the runner, as
``/grading/lib/course_protocol.py``, with the helpers' own contract (:mod:`helpers.core.contract`,
as ``course_contract.py``) that it builds on: the runner imports the same names the grader does,
and nothing else of the bundle (importing ``helpers`` would load torch into the runner).

The conversation, newline-delimited JSON on the file descriptor ``$COURSE_CHANNEL_FD``:

1. the runner executes the notebook's cells; when the job asks for it (``return_notebook``, for
   ``course pdf``) it sends ``{"event": NOTEBOOK, "text"}``, the executed notebook; then
   ``{"event": CELLS_DONE, "first_error", "kernel_died"}``;
2. the grader answers on the runner's stdin with one line, the test files
   ``[{"question", "source"}]``: test code enters the sandbox only after the student's cells ran;
3. ``{"event": TEST, "question", "test", "passed", "error", "values"}`` per test function, with
   the values ``expect`` collected while it ran (``test`` is None for a whole file that failed);
4. ``{"event": DONE}``; or ``{"event": RUNNER_ERROR, "error"}`` when the runner itself failed.
"""

from __future__ import annotations

try:  # inside the sandbox: the contract copied beside this module
    from course_contract import GOLDEN_MODE_ENV, GOLDEN_OUTBOX_ENV, SETTING_ENV, WAIT_POLICY, WAIT_POLICY_ENV
except ImportError:  # in the grader
    from helpers.core.contract import GOLDEN_MODE_ENV, GOLDEN_OUTBOX_ENV, SETTING_ENV, WAIT_POLICY, WAIT_POLICY_ENV

#: The file descriptor that carries the runner's messages out (only the runner holds it).
CHANNEL_ENV = "COURSE_CHANNEL_FD"
#: The read end of the lifeline pipe: end of file means the grader is done or gone.
LIFELINE_ENV = "COURSE_LIFELINE_FD"
#: The runner's end of its socket pair to the fork server, where one starts kernels warm
#: (:mod:`autograder.sandbox.forkserver`); only the runner holds it, as it holds the channel.
FORKSERVER_ENV = "COURSE_FORKSERVER_FD"
#: The namespaces the runner sends the fork server (as descriptors, in this order) for its kernel to join.
KERNEL_NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")
#: Where the sandbox shows the run its files: the notebook and the job (read-only), and the
#: assignment's public files (helpers, data; read-only).
SUBMISSION_ENV = "COURSE_SUBMISSION_DIR"
ASSETS_ENV = "COURSE_ASSETS_DIR"
#: Paths as bubblewrap binds them (POSIX separation shares host folders instead: see the env above).
SANDBOX_LIB, SANDBOX_ASSETS, SANDBOX_SUBMISSION, SANDBOX_MODELS = ("/grading/lib", "/grading/assets",
                                                                    "/grading/submission", "/grading/models")

#: The files of the library the grader copies in: the runner, this module, the contract, and the
#: test driver the runner hands the kernel (rendered from ``templates/test_driver.py.tmpl``).
RUNNER_FILE, PROTOCOL_FILE, CONTRACT_FILE = "course_runner.py", "course_protocol.py", "course_contract.py"
TEST_DRIVER_FILE = "course_test_driver.py"
FORKSERVER_FILE = "course_forkserver.py"
#: The library's folder of matplotlib's font list, made by the grader once per run: the runner copies
#: it into the sandbox's own matplotlib folder, so no kernel scans the system's fonts again.
FONT_LIST_DIR = "matplotlib"

#: The job folder: the submission's notebook, and what to do with it.
NOTEBOOK_FILE = "submission.ipynb"
JOB_FILE = "job.json"


def job(notebook_name: str, return_notebook: bool, caps: dict, tests_follow: bool = False) -> dict:
    """``job.json``: the name otter's init cell expects, whether to send the executed notebook (and
    whether tests follow it, which caps it tighter), and the caps on what the runner sends
    (``autograder.limits.runner_caps()``)."""
    return {"notebook_name": notebook_name, "return_notebook": return_notebook, "tests_follow": tests_follow,
            "caps": caps}


#: A public-check cell, whole: ``grader.check("q1_softmax")`` (group 1: the question). The runner
#: skips such cells (public checks carry no points) and ``course grade --nbgrader-gradebook`` puts a
#: question's hidden results after it.
PUBLIC_CHECK = r"""grader\.check\(\s*["']([\w.-]+)["']\s*\)"""

#: The runner's messages.
NOTEBOOK, CELLS_DONE, TEST, DONE, RUNNER_ERROR = "notebook", "cells_done", "test", "done", "runner_error"

#: The setting every grading kernel trains in (it wins over the notebook's ``use_setting``).
GRADING_SETTING = "grading"


#: How long an idle OpenMP thread of torch's spins before it sleeps when its job has cores of its
#: own: libgomp's default when no policy is named. It is named here (with ACTIVE) because a kernel
#: given no policy would follow the load (helpers.cpu) and change its thread count.
SPIN_BEFORE_SLEEP = {WAIT_POLICY_ENV: "ACTIVE", "GOMP_SPINCOUNT": "300000"}


#: The Hugging Face cache's place in the sandboxes (nothing is ever cached there: they grade offline).
HF_HOME_NOWHERE = "/nonexistent/huggingface"


def thread_settings(threads: int, *, shared_cores: bool = True) -> dict[str, str]:
    """torch's threads for one kernel: ``threads``, fixed. With ``shared_cores`` (the jobs' threads
    together outnumber the cores) idle threads sleep at once, as spinning would take a core another
    job needs; without, they spin briefly first: sleeping at once made a notebook's tests of many
    small operations about twice as slow (benchmarks/submission_time.py)."""
    counts = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    return {**counts, WAIT_POLICY_ENV: WAIT_POLICY} if shared_cores else {**counts, **SPIN_BEFORE_SLEEP}


def sandbox_environment(venv_bin: str, threads: int, *, shared_cores: bool = True) -> dict[str, str]:
    """What every sandboxed run starts with (the seal adds its own HOME and TMPDIR, the pool the paths)."""
    return {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "USER": "student",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "JUPYTER_PLATFORM_DIRS": "1",
        "MPLBACKEND": "Agg",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        # the Hugging Face cache, which holds nothing offline, at one place no run can create: the same
        # for every run and for the fork server that imports transformers before any run's HOME is known
        "HF_HOME": HF_HOME_NOWHERE,
        **thread_settings(threads, shared_cores=shared_cores),
        SETTING_ENV: GRADING_SETTING,
    }


__all__ = ["SANDBOX_ASSETS", "HF_HOME_NOWHERE", "ASSETS_ENV", "CELLS_DONE", "CHANNEL_ENV", "CONTRACT_FILE", "DONE", "FONT_LIST_DIR",
           "FORKSERVER_ENV", "FORKSERVER_FILE", "KERNEL_NAMESPACES", "GOLDEN_MODE_ENV", "GOLDEN_OUTBOX_ENV", "GRADING_SETTING", "JOB_FILE", "SANDBOX_LIB", "LIFELINE_ENV",
           "SANDBOX_MODELS", "NOTEBOOK", "PUBLIC_CHECK",
           "NOTEBOOK_FILE", "PROTOCOL_FILE", "RUNNER_ERROR", "RUNNER_FILE", "SETTING_ENV",
           "SANDBOX_SUBMISSION", "SUBMISSION_ENV", "TEST", "TEST_DRIVER_FILE", "job", "sandbox_environment", "thread_settings"]
