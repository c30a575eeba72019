"""The ``course`` command: build, grade, report, pdf, check and demo."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from autograder.layout import CourseError, Layout
from autograder.limits import DEFAULT_LIMITS

#: The limits' defaults, as the sandbox defines them (the options show and override them).


def find_layout(args) -> Layout:
    """The course bundle to work on, said out loud: an instructor may run this from any folder."""
    layout = Layout.find(args.course)
    print(f"course bundle: {layout.root}", file=sys.stderr)
    return layout


def cmd_build(args) -> int:
    from autograder.build.assign import build_all

    layout = find_layout(args)
    slugs = args.slugs or layout.slugs()
    built = build_all(layout, slugs, jobs=args.jobs)
    for autograder in built:
        if args.nbgrader:
            from autograder.platforms.nbgrader.source import add_to_course

            notebook = add_to_course(layout, autograder, Path(args.nbgrader).resolve())
            print(f"[{autograder.name}] nbgrader source -> {notebook}")
    if args.nbgrader:
        print(f"nbgrader course: {Path(args.nbgrader).resolve()}; next: cd there and run "
              f"`nbgrader generate_assignment <assignment>`")
    return 0


def cmd_grade(args) -> int:
    from autograder.grade.grader import Grader, Limits
    from autograder.grade.results import format_table

    layout = find_layout(args)
    started = time.perf_counter()
    grader = Grader(layout, Path(args.submissions).resolve(), Path(args.out).resolve(),
                    Limits(timeout=args.timeout, memory_mb=args.memory, processes=args.processes), jobs=args.jobs,
                    force=args.force, assignment=args.assignment,
                    autograder=Path(args.autograder).resolve() if args.autograder else None, unsafe=args.unsafe,
                    sandbox_mode=args.sandbox, roster=Path(args.roster).resolve() if args.roster else None)
    rows = grader.run()
    print(format_table(rows))
    if args.nbgrader_gradebook:
        from autograder.platforms.nbgrader.gradebook import write_gradebook

        counts = write_gradebook(rows, Path(args.nbgrader_gradebook), layout, grader.submissions)
        print(f"\nnbgrader gradebook {args.nbgrader_gradebook}: {counts['submissions']} submission(s) written, "
              f"{counts['skipped']} skipped; written answers wait in the formgrader")
    print(f"\n{len(rows)} submission(s) in {time.perf_counter() - started:.1f} s; "
          f"results: {grader.out / 'results.csv'} and results.json; feedback: {grader.out / 'feedback'}/; "
          f"gradebooks (one per assignment, and its Canvas form): {grader.out / 'gradebook'}/")
    return 0


def cmd_pdf(args) -> int:
    from autograder.grade.grader import Limits
    from autograder.pdf import PdfMaker, summary

    layout = find_layout(args)
    maker = PdfMaker(layout, Path(args.submissions).resolve(), Path(args.out).resolve(), jobs=args.jobs,
                     pagebreaks=args.gradescope, force=args.force, assignment=args.assignment,
                     execute=not args.no_execute, limits=Limits(timeout=args.timeout),
                     graded=Path(args.graded).resolve() if args.graded else None)
    records = maker.run()
    print(summary(maker, records))
    print(f"{len(records)} submission(s) in {maker.seconds:.1f} s; PDFs in {maker.out}/<assignment>/")
    return 0


def _positive_mb(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: a container's memory is a positive number of MB")
    return value


def cmd_gradescope_check(args) -> int:
    from autograder.platforms.gradescope import emulate

    results = emulate(Path(args.zip).resolve(), Path(args.submission).resolve(), mode=args.sandbox,
                      memory_mb=args.memory)
    log = results.pop("_log", "")
    left_running = results.pop("_left_running", None)
    if args.verbose:
        print(log)
    if left_running:
        print(f"warning: the autograder left {left_running} process(es) running in the container when it ended "
              "(ended with the check; on Gradescope they end with the container)", file=sys.stderr)
    print(json.dumps(results, indent=1) if args.json else results["output"])
    if not args.json:
        for test in results["tests"][1:]:
            print(f"  {test['name']}: {test.get('score', 0):g}/{test.get('max_score', 0):g} ({test['visibility']})")
        print(f"score: {results['score']:g}")
    return 0


def cmd_check(args) -> int:
    from autograder.build.check import check
    from autograder.build.release import release_problems

    layout = find_layout(args)
    problems = release_problems(layout, Path(args.release).resolve()) if args.release else check(layout, args.slugs or None)
    for problem in problems:
        print(f"FAIL {problem}")
    print("course check: " + ("all good" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


def cmd_new(args) -> int:
    from autograder.build.new import new_assignment

    layout = find_layout(args)
    for path in new_assignment(layout, args.slug):
        print(f"wrote {path.relative_to(layout.root)}")
    print(f"next: course build {args.slug}, then grade its solved notebook to see full marks; replace the example "
          "question with your own (docs/instructors/writing-an-assignment.md)")
    return 0


def cmd_release(args) -> int:
    from autograder.build.release import make_release

    dest = Path(args.dest).resolve()
    problems = make_release(find_layout(args), dest, args.slugs or None, force=args.force)
    for problem in problems:
        print(f"FAIL {problem}")
    if problems:
        print(f"course release: {dest} holds {len(problems)} thing(s) students must not receive; do not hand it out")
        return 1
    print(f"course release: {dest} is ready to hand out (notebooks, helpers, README.md, pyproject.toml, "
          "environment.yml and postBuild for Binder); `course check --release` found nothing a student must not see")
    return 0


def cmd_report(args) -> int:
    from autograder.report.compose import main_report

    try:  # the bundle gives the template (the code students were given); a report can do without
        layout = Layout.find(args.course)
    except CourseError:
        layout = None
    return main_report(args, layout)


def cmd_demo(args) -> int:
    from autograder.demo import demo

    return demo(find_layout(args), Path(args.out).resolve() if args.out else None, unsafe=args.unsafe)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="course", description="Build, grade and check the course notebooks.")
    p.add_argument("--course", metavar="DIR", help="the course bundle (default: the one at or above the current "
                                                    "folder, else the one this command is installed from)")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build student notebooks and autograders from the masters")
    b.add_argument("slugs", nargs="*", help="assignments to build (default: all)")
    b.add_argument("--jobs", type=int, default=2, help="assignments built at once (default 2)")
    b.add_argument("--nbgrader", metavar="DIR", help="also write an nbgrader course folder: source/<assignment>/ "
                                                     "with nbgrader cell metadata, and nbgrader_config.py")
    b.set_defaults(func=cmd_build)

    g = sub.add_parser("grade", help="grade every .ipynb / .zip in a folder")
    g.add_argument("submissions", help="folder of submissions (searched recursively)")
    g.add_argument("--out", required=True, help="folder for results.csv, results.json and feedback/")
    g.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    g.add_argument("--timeout", type=float, default=DEFAULT_LIMITS.timeout,
                   help=f"seconds per submission (default {DEFAULT_LIMITS.timeout:g})")
    g.add_argument("--memory", type=int, default=DEFAULT_LIMITS.memory_mb,
                   help=f"memory limit in MB for all processes of one submission together (default {DEFAULT_LIMITS.memory_mb})")
    g.add_argument("--processes", type=int, default=DEFAULT_LIMITS.processes,
                   help=f"processes one submission may run at once (default {DEFAULT_LIMITS.processes})")
    g.add_argument("--sandbox", choices=("auto", "bubblewrap", "posix"), default=None,
                   help="how to seal: bubblewrap where it starts, else a separate uid as root (auto, the default; "
                        "or $COURSE_SANDBOX)")
    g.add_argument("--unsafe", action="store_true",
                   help="grade without any seal (plain otter in your account), for code you trust only: a "
                        "submission can then read hidden tests and forge its score")
    g.add_argument("--force", action="store_true", help="regrade submissions that already have a row")
    g.add_argument("--assignment", help="assignment slug, when submissions do not name one")
    g.add_argument("--autograder", help="autograder zip to use instead of out/autograders/<slug>-autograder.zip")
    g.add_argument("--roster", metavar="CSV",
                   help="whose each upload is, for the gradebook: a CSV with a 'student' column and optionally 'name' "
                        "and 'file' (the start of that student's file names); without it, Canvas's and Moodle's "
                        "bulk-download names, a folder per student, or the file name tell")
    g.add_argument("--nbgrader-gradebook", metavar="PATH",
                   help="also write the scores into this nbgrader gradebook.db (the assignment made there by "
                        "`nbgrader generate_assignment`) and the notebooks into autograded/ beside it, for the "
                        "written answers in the formgrader")
    g.set_defaults(func=cmd_grade)

    f = sub.add_parser("pdf", help="PDFs of the manually graded answers: one per submission, one merged per assignment")
    f.add_argument("submissions", help="folder of submissions (searched recursively)")
    f.add_argument("--out", required=True, help="folder for the PDFs, the merged files and pdf-log.txt")
    f.add_argument("--jobs", type=int, default=2, help="PDFs made at once (default 2)")
    f.add_argument("--gradescope", action="store_true",
                   help="start every question on a new page, as Gradescope's page matching expects")
    f.add_argument("--force", action="store_true", help="remake PDFs that are already there and unchanged")
    f.add_argument("--assignment", help="assignment slug, when submissions do not name one")
    f.add_argument("--graded", metavar="RESULTS",
                   help="the `course grade --out` folder of these submissions: a notebook saved without outputs takes "
                        "the outputs of its grading run instead of running again")
    f.add_argument("--no-execute", action="store_true",
                   help="do not run notebooks saved without outputs (by default they run sealed, as in grading)")
    f.add_argument("--timeout", type=float, default=DEFAULT_LIMITS.timeout,
                   help=f"seconds to run such a notebook (default {DEFAULT_LIMITS.timeout:g})")
    f.set_defaults(func=cmd_pdf)

    gs = sub.add_parser("gradescope-check", help="grade one submission with an autograder zip the way Gradescope "
                                                 "runs it (as root: the zip in /autograder, sealed by a separate uid)")
    gs.add_argument("zip", help="the autograder zip (out/autograders/<slug>-autograder.zip)")
    gs.add_argument("submission", help="a notebook or an export zip, as a student uploads it")
    gs.add_argument("--sandbox", choices=("posix", "bubblewrap", "auto"), default="posix",
                    help="the seal the grader must use (default posix: Gradescope's containers have no user namespaces)")
    gs.add_argument("--memory", type=_positive_mb, metavar="MB",
                    help="the container's memory, as set in the assignment's Autograder Settings on Gradescope "
                         "(its default is 768); by default this machine's")
    gs.add_argument("--json", action="store_true", help="print results.json as Gradescope reads it")
    gs.add_argument("--verbose", action="store_true", help="also print what the autograder printed")
    gs.set_defaults(func=cmd_gradescope_check)

    r = sub.add_parser("report", help="one HTML page per assignment: scores, tests that misbehave, common mistakes, "
                                      "similar submissions")
    r.add_argument("results", help="a results folder of course grade, or a folder of Gradescope results.json files")
    r.add_argument("--out", help="the page to write (default RESULTS/report.html; with several assignments "
                                 "report-<assignment>.html beside it)")
    r.add_argument("--submissions", help="the folder that was graded, for the code comparison (default: the one "
                                         "course grade recorded in RESULTS/run.json)")
    r.add_argument("--assignment", help="report only this assignment (for Gradescope results, its name)")
    r.set_defaults(func=cmd_report)

    c = sub.add_parser("check", help="rebuild into a temp folder, compare with notebooks/, look for leaks")
    c.add_argument("slugs", nargs="*", help="assignments to check (default: all)")
    c.add_argument("--release", metavar="DIR", help="check a student release instead: no solution line, hidden "
                                                    "test, golden value, grader code or nbgrader in it")
    c.set_defaults(func=cmd_check)

    nw = sub.add_parser("new", help="a new assignment that builds and grades at once: a minimal master, its "
                                    "helpers module and its variants file")
    nw.add_argument("slug", help="the assignment's name (lowercase letters, digits and _)")
    nw.set_defaults(func=cmd_new)

    rl = sub.add_parser("release", help="what students receive: notebooks, helpers, a README and their install "
                                        "files only, checked to hold no secret")
    rl.add_argument("dest", metavar="DIR", help="an empty or new folder (a public repository, a JupyterHub share, Binder)")
    rl.add_argument("slugs", nargs="*", help="assignments to release (default: all)")
    rl.add_argument("--force", action="store_true", help="replace what DIR holds")
    rl.set_defaults(func=cmd_release)

    d = sub.add_parser("demo", help="build, make sample submissions, grade them, print the table")
    d.add_argument("--out", help="demo folder (default out/demo)")
    d.add_argument("--unsafe", action="store_true", help="grade without the sandbox (see course grade --unsafe)")
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.course = getattr(args, "course", None)
    try:
        return args.func(args)
    except CourseError as err:
        print(f"course {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
