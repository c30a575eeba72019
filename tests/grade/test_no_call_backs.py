"""No module of the grader calls back into a module that called it: in every thread of a real sealed
``course grade`` run, the grader's modules on the stack never repeat (``grader -> batch -> grader``
or ``session -> seal -> session`` would). A module hands data down and gets data back; what a
batch needs from its caller (which records still hold) the caller works out itself."""

import shutil
import sys
import threading

from autograder.grade.grader import Grader
from tests.support.batches import LIMITS, SLUG


def call_backs_during(run) -> set[tuple[str, ...]]:
    """The stacks of grader modules (outermost first, a module's consecutive frames as one) in which
    a module appears twice, seen at any call made while ``run()`` ran, in any thread."""
    found: set[tuple[str, ...]] = set()

    def profile(frame, event, arg):
        if event != "call" or not frame.f_globals.get("__name__", "").startswith("autograder."):
            return
        modules, f, owner = [], frame, None
        while f is not None:
            name = f.f_globals.get("__name__", "")
            if name.startswith("autograder."):
                me = f.f_locals.get("self")
                # one object's methods are one unit, wherever its class's parts are defined (a seal's
                # run loop in seal.py calling its own bubblewrap.py method is no call-back)
                if (not modules or modules[-1] != name) and (me is None or me is not owner):
                    modules.append(name)
                owner = me
            f = f.f_back
        if len(modules) != len(set(modules)):
            found.add(tuple(reversed(modules)))

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return found


def test_a_sealed_grading_run_never_calls_back_into_its_caller(layout, fresh_notebooks, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(layout.autograder_zip(SLUG).with_name(f"{SLUG}-solution.ipynb"), subs / "solved.ipynb")
    (subs / "broken.ipynb").write_text("{ not a notebook")  # the intake's path as well
    grader = Grader(layout, subs, tmp_path / "out", LIMITS, jobs=1)
    rows = {}
    found = call_backs_during(lambda: rows.update((r["submission"], r) for r in grader.run(log=lambda *a: None)))
    assert found == set(), "\n".join(" -> ".join(stack) for stack in sorted(found))
    # the run was real: the solution graded in the sandbox to full marks, the broken file invalid
    assert rows["solved.ipynb"]["status"] == "ok" and rows["solved.ipynb"]["total"] == rows["solved.ipynb"]["possible"] > 0
    assert rows["broken.ipynb"]["status"] == "invalid"


def test_the_call_back_finder_sees_one():
    """Two made-up grader modules: the caller hands the callee a function of its own, which the
    callee calls (a call-back); a plain call down is not one."""
    callee = {"__name__": "autograder.callee"}
    exec("def call(back):\n    return back()\n\ndef plain():\n    return 1\n", callee)
    caller = {"__name__": "autograder.caller", "call": callee["call"], "plain": callee["plain"]}
    exec("def start():\n    return call(lambda: 1)\n\ndef down():\n    return plain()\n", caller)
    assert call_backs_during(caller["start"]) == {("autograder.caller", "autograder.callee", "autograder.caller")}
    assert call_backs_during(caller["down"]) == set()
