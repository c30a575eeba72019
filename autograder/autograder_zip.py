"""The autograder zip, read and written in one place: its layout, its tests, its golden values,
its public files, and what it carries for sealed grading on Gradescope.

Layout (otter's, with the bundle's additions)::

    otter_config.json          the assignment's name
    tests/<question>.py        one file per question, a test function per case (public and hidden)
    files/                     otter's ``autograder_files``: helpers and data the notebook may use,
    files/golden_values.json   and the golden values, never shown to a submission
    setup.sh, run_autograder   Gradescope's image set-up (with the bundle's lines) and its start
    run_otter.py               Gradescope's entry point: grade sealed through the carried package
    course/autograder/**       the grader modules sealed grading needs (:func:`carried_modules`) and
                               the templates they render (:func:`carried_templates`)

Gradescope unpacks it into ``/autograder/source``; :class:`Autograder` reads the zip or that folder.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from helpers.core.contract import GOLDEN_FILENAME

from autograder.grade.submissions import sha256
from autograder.layout import slug_of_autograder
from autograder.templates import render

CONFIG_FILE = "otter_config.json"
TESTS_DIR = "tests"
#: The zip's folder of files the notebook may use (otter's ``autograder_files``).
FILES_DIR = "files"
GOLDEN_ENTRY = f"{FILES_DIR}/{GOLDEN_FILENAME}"
SETUP_FILE = "setup.sh"
RUN_AUTOGRADER = "run_autograder"
#: Where the zip carries the grading code (this package); helpers ship in ``files/`` already.
PACKAGE_DIR = "course"
ENTRY_FILE = "run_otter.py"
#: Gradescope's folders: the zip unpacked in ``source``, the upload in ``submission``, and ``results``.
GRADESCOPE_ROOT = "/autograder"
SOURCE_DIR = "source"
#: What hidden tests call when they need the bundled GPT (converted once, before any sandbox starts).
GPT_LOADER = "load_gpt("
#: What hidden tests call when they load a bundled pretrained model (GPT or BERT).
MODEL_LOADERS = (GPT_LOADER, "load_bert(")

#: Where the zip's ``run_otter.py`` and ``setup.sh`` lines (autograder/templates/) find things.
TEMPLATE_PLACES = {"root": GRADESCOPE_ROOT, "source": SOURCE_DIR, "package": PACKAGE_DIR, "files": FILES_DIR}


class NotACourseAutograder(ValueError):
    """An autograder zip this bundle cannot grade sealed (not made by ``course build``); the message says what to do."""


@dataclass
class Autograder:
    """An autograder zip (or the folder Gradescope unpacks it into), read. Only ``assets``
    (``files/`` without the golden values, extracted by :meth:`load`) is shown to submissions."""

    zip_path: Path
    name: str  # assignment name, as the notebook file is called
    tests: dict  # question -> [{"test", "points", "hidden"}], in the order otter runs them
    sources: list[dict]  # [{"question", "source"}] test files, sent in after the cells ran
    golden: dict  # key -> spec (with "test")
    sha256: str = ""  # of the zip file (empty for an unpacked folder): a saved grade names it
    assets: Path | None = None  # public files of the zip (helpers, data), golden values left out

    @property
    def notebook_name(self) -> str:
        """The file name otter's init cell expects (``otter.Notebook("<assignment>.ipynb")``)."""
        return f"{self.name}.ipynb"

    @property
    def needs_bundled_gpt(self) -> bool:
        """Do the tests load the bundled GPT (which the grader converts once, before the sandboxes)?"""
        return any(GPT_LOADER in test_file["source"] for test_file in self.sources)

    @property
    def loads_pretrained_models(self) -> bool:
        """Do the tests load a bundled pretrained model (so its kernels import transformers)?"""
        return any(loader in test_file["source"] for test_file in self.sources for loader in MODEL_LOADERS)

    @property
    def possible(self) -> dict[str, float]:
        """Question name -> points available (autograded questions only)."""
        return {q: sum(case["points"] for case in cases) for q, cases in self.tests.items()}

    def golden_by_test(self) -> dict[str, dict[str, dict]]:
        """Test function -> ``{golden key: spec}`` of the values it records, in the golden file's order."""
        grouped: dict[str, dict[str, dict]] = {}
        for key, spec in self.golden.items():
            grouped.setdefault(spec.get("test"), {})[key] = spec
        return grouped

    @classmethod
    def read(cls, zip_path: Path, *, need_golden: bool = True) -> "Autograder":
        """Read an autograder zip, or the folder it was unpacked into, without extracting anything.
        Raises NotACourseAutograder, saying what to do, for a zip ``course build`` did not make (plain
        ``otter assign`` writes no golden values, which sealed grading judges by); ``need_golden=False``
        (unsealed otter grading) reads such a zip with no golden values."""
        try:
            with opened(zip_path) as zf:
                names = set(zf.namelist())
                if GOLDEN_ENTRY not in names and need_golden:
                    raise NotACourseAutograder(
                        f"{Path(zip_path).name} has no golden values ({GOLDEN_ENTRY}): it was not built by `course build` "
                        "(plain `otter assign`?). Sealed grading judges the values a submission's tests collect against "
                        "golden values outside the notebook, so it cannot grade this zip. Rebuild the assignment from its "
                        "master with `course build` (docs/instructors/writing-an-assignment.md), or grade it unsealed, "
                        "for code you trust only, with `course grade --unsafe` or `otter run`")
                if CONFIG_FILE not in names:
                    raise NotACourseAutograder(f"{Path(zip_path).name} is not an otter autograder zip (no {CONFIG_FILE})")
                tests = read_tests(zf)
                config = json.loads(zf.read(CONFIG_FILE))
                golden = json.loads(zf.read(GOLDEN_ENTRY))["values"] if GOLDEN_ENTRY in names else {}
                sources = [{"question": Path(name).stem, "source": zf.read(name).decode("utf-8")}
                           for name in names if _is_test_file(name)]
        except (zipfile.BadZipFile, OSError, KeyError, ValueError) as err:
            if isinstance(err, NotACourseAutograder):
                raise
            raise NotACourseAutograder(f"{Path(zip_path).name} could not be read as an autograder zip: "
                                       f"{type(err).__name__}: {str(err)[:200]}") from None
        name = config.get("assignment_name") or slug_of_autograder(zip_path)
        return cls(Path(zip_path), name, tests, sorted(sources, key=lambda s: s["question"]),
                   golden, sha256(Path(zip_path)) if Path(zip_path).is_file() else "")

    @classmethod
    def load(cls, zip_path: Path, folder: Path) -> "Autograder":
        """:meth:`read`, with the public files extracted to ``folder/assets`` for the sandboxes
        (folders 755, files 644: ``folder`` is the grader's own, under a temp folder)."""
        autograder = cls.read(zip_path)
        autograder.assets = folder / "assets"
        with opened(zip_path) as zf:
            for name in zf.namelist():
                parts = Path(name).parts
                if (parts[0] != FILES_DIR or name.endswith("/") or parts[-1] == GOLDEN_FILENAME
                        or ".." in parts or "__pycache__" in parts):
                    continue
                target = autograder.assets / Path(*parts[1:])
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
        autograder.assets.mkdir(parents=True, exist_ok=True)
        open_up(folder)
        return autograder


def _is_test_file(name: str) -> bool:
    return name.startswith(f"{TESTS_DIR}/") and name.endswith(".py")


def read_tests(zf) -> dict[str, list[dict]]:
    """Question name -> its test functions ``{"test", "points", "hidden"}``, in the order otter runs them.

    ``zf`` is an open zip, or anything with ``namelist`` and ``read`` (see :func:`opened`). Otter
    names test cases "q1 - 1", "q1 - 2"...; the function names are what the golden file ties values
    to, so the two are matched by position.
    """
    questions: dict[str, list[dict]] = {}
    for name in sorted(zf.namelist()):
        if not _is_test_file(name):
            continue
        tree = ast.parse(zf.read(name).decode("utf-8"))
        question = Path(name).stem
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "name" for t in node.targets):
                question = ast.literal_eval(node.value)
        questions[question] = [
            {"test": node.name, **_decorator_config(node.decorator_list[0])}
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.decorator_list
        ]
    return questions


def _decorator_config(decorator: ast.expr) -> dict:
    return case_settings({k.arg: ast.literal_eval(k.value) for k in getattr(decorator, "keywords", [])})


def case_settings(config: dict) -> dict:
    """A test case's ``points`` and ``hidden``, from a master's TEST CONFIG header or otter's
    ``@test_case(...)`` keywords (the build writes the one into the other): unless said, a case is
    public and worth nothing."""
    return {"points": config.get("points") or 0, "hidden": bool(config.get("hidden", False))}


def opened(zip_path: Path):
    """The zip, or the folder it was unpacked into, as something with ``namelist`` and ``read``."""
    return _Unpacked(zip_path) if Path(zip_path).is_dir() else zipfile.ZipFile(zip_path)


class _Unpacked(contextlib.AbstractContextManager):
    """An unpacked autograder folder read like its zip (``namelist``, ``read``)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def namelist(self) -> list[str]:
        return sorted(p.relative_to(self.folder).as_posix() for p in self.folder.rglob("*") if p.is_file())

    def read(self, name: str) -> bytes:
        return (self.folder / name).read_bytes()

    def __exit__(self, *exc):
        return False


def open_up(folder: Path) -> None:
    """Readable by the sandbox's uid: folders 755, files 644 (all under a grader-owned temp folder)."""
    for root, dirs, files in os.walk(folder):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)


# ----------------------------------------------------------------------------------------- writing
#: Where sealed grading on Gradescope starts (the entry point imports it), the runner the session copies
#: into the sandbox (a file, not an import), and the module the judge loads on demand
#: (``helpers.core.measures`` imports it only when it judges).
CARRIED_ROOTS = ("platforms.gradescope", "sandbox.runner", "judge.sampling")


def _module_file(package: Path, dotted: str) -> Path | None:
    """The file of ``autograder.<dotted>`` (a module, or a package's ``__init__.py``), if there is one."""
    base = package.joinpath(*dotted.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def carried_modules(package: Path = Path(__file__).parent) -> list[str]:
    """The grader modules the zip carries, as paths inside the package: everything
    :data:`CARRIED_ROOTS` import from it, at any depth (function-level imports included), and the
    ``__init__.py`` of every package on their way; the instructor's tools (build, pdf, report,
    nbgrader) stay out."""
    todo, found = list(CARRIED_ROOTS), set()
    while todo:
        dotted = todo.pop()
        path = _module_file(package, dotted)
        if path is None or path in found:
            continue
        found.add(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("autograder"):
                continue
            inner = node.module.partition(".")[2]
            todo += [inner] if inner else []
            # ``from autograder.sandbox import runner`` names a module as well as a package
            todo += [f"{inner}.{alias.name}".lstrip(".") for alias in node.names]
    inits = {parent / "__init__.py" for path in found for parent in path.relative_to(package).parents}
    return sorted({path.relative_to(package).as_posix() for path in found} | {init.as_posix() for init in inits})


def gradescope_entries(package: Path = Path(__file__).parent) -> dict[str, bytes]:
    """What the zip carries for sealed grading on Gradescope: the grader modules it needs, and a
    ``run_otter.py`` that grades through them (``otter run`` does not use that file and grades as before)."""
    entries = {ENTRY_FILE: render("run_otter.py.tmpl", **TEMPLATE_PLACES).encode("utf-8")}
    for name in carried_modules(package) + carried_templates(package):
        entries[f"{PACKAGE_DIR}/autograder/{name}"] = (package / name).read_bytes()
    return entries


def carried_templates(package: Path = Path(__file__).parent) -> list[str]:
    """The template files, as paths inside the package: the sandbox renders its lifeline, test driver
    and otter stand-in from them on Gradescope too."""
    return sorted(path.relative_to(package).as_posix() for path in (package / "templates").glob("*.tmpl"))


def setup_additions(no_deps: list[str]) -> str:
    """Lines appended to otter's Gradescope ``setup.sh``: the packages a requirements list cannot
    install without their dependencies (``no_deps``), then :func:`autograder.platforms.gradescope.prepare_image`
    (the sandbox's uid may run the environment's Python; the bundled GPT converted once into the
    image when the tests load it, so that no submission pays the 20 s conversion)."""
    return render("setup_additions.sh.tmpl", no_deps=" ".join(no_deps), **TEMPLATE_PLACES)


def write_stable_zip(source: Path, dest: Path, setup_extra: str = "", entries: dict[str, bytes] | None = None) -> None:
    """Copy otter's zip with sorted entries and fixed timestamps: same content, same bytes; with
    ``setup_extra`` appended to ``setup.sh`` and ``entries`` added (or put in place of otter's).

    ``course grade`` reuses saved rows while the autograder's sha256 is unchanged, so rebuilding
    an unchanged master must not make every submission look stale. Written beside ``dest`` and moved
    into place: a grader reading the zip while it is rebuilt reads the old one or the new one, whole.
    """
    entries = entries or {}
    partial = dest.with_name(f".{dest.name}.partial")
    try:
        with zipfile.ZipFile(source) as src, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
            for name in sorted({*src.namelist(), *entries}):
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = (0o755 if name == RUN_AUTOGRADER else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                data = entries[name] if name in entries else src.read(name)
                if name == SETUP_FILE:
                    data = data.rstrip(b"\n") + b"\n" + setup_extra.encode("utf-8")
                out.writestr(info, data)
        os.replace(partial, dest)
    finally:
        partial.unlink(missing_ok=True)
