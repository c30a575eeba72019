"""Where things live in the bundle: one place for every path the tools use."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV = "COURSE_ROOT"
#: Where generated files go instead of ``<bundle>/out`` (the test suite builds into a temp folder).
OUT_ENV = "COURSE_OUT"
#: How an autograder zip is named: ``<slug>-autograder.zip``.
AUTOGRADER_SUFFIX = "-autograder.zip"


def slug_of_autograder(path: Path) -> str:
    """The assignment an autograder zip is named after (a folder's own name otherwise)."""
    return Path(path).stem.removesuffix(AUTOGRADER_SUFFIX.removesuffix(".zip"))


class CourseError(Exception):
    """An error the instructor can act on; the CLI prints its message without a traceback."""


@dataclass(frozen=True)
class Layout:
    root: Path
    out_dir: Path | None = None  # generated files; None: ``root/out``

    @classmethod
    def find(cls, start: str | os.PathLike | None = None) -> "Layout":
        """The bundle at or above ``start`` (``--course``), else $COURSE_ROOT, else the current folder,
        else the bundle this package is installed from (an editable install, as ``make install`` makes);
        its generated files in $COURSE_OUT if set."""
        found = cls._find(start)
        return cls(found.root, Path(os.environ[OUT_ENV]).resolve()) if os.environ.get(OUT_ENV) else found

    @classmethod
    def _find(cls, start: str | os.PathLike | None) -> "Layout":
        if start or os.environ.get(ROOT_ENV):
            here = Path(start or os.environ[ROOT_ENV]).resolve()
            found = cls._at_or_above(here)
            if found is None:
                raise CourseError(f"no course bundle (a folder with solutions/ and helpers/) at or above {here}")
            return found
        here = Path.cwd().resolve()
        found = cls._at_or_above(here) or cls._at_or_above(Path(__file__).resolve().parent)
        if found is None:
            raise CourseError(f"no course bundle (a folder with solutions/ and helpers/) at or above {here}, and "
                              "this package is not installed from one: pass --course DIR")
        return found

    @classmethod
    def _at_or_above(cls, here: Path) -> "Layout | None":
        for folder in (here, *here.parents):
            if (folder / "solutions").is_dir() and (folder / "helpers").is_dir():
                return cls(folder)
        return None

    @property
    def solutions(self) -> Path:
        return self.root / "solutions"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def helpers(self) -> Path:
        return self.root / "helpers"

    @property
    def out(self) -> Path:
        """Git-ignored folder for everything generated that is not committed."""
        return self.out_dir or self.root / "out"

    def slugs(self) -> list[str]:
        return sorted(p.parent.name for p in self.solutions.glob("*/*.ipynb") if p.stem == p.parent.name)

    def master(self, slug: str) -> Path:
        path = self.solutions / slug / f"{slug}.ipynb"
        if not path.is_file():
            known = ", ".join(self.slugs()) or "none"
            raise CourseError(f"no master notebook for {slug!r} at {path} (known assignments: {known})")
        return path

    def student_dir(self, slug: str) -> Path:
        return self.notebooks / slug

    def autograder_zip(self, slug: str) -> Path:
        return self.out / "autograders" / f"{slug}{AUTOGRADER_SUFFIX}"

    def solution_notebook(self, slug: str) -> Path:
        """The executed-free reference notebook as otter's autograder sees it (for demos/tests)."""
        return self.out / "autograders" / f"{slug}-solution.ipynb"
