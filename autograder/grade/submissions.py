"""A submission's intake: where submissions are found, what they are called, and the one notebook
each holds (an ``.ipynb``, or a zip with exactly one), checked before anything runs it.

``course grade``, ``course pdf``, the Gradescope entry point and the nbgrader gradebook writer all
take submissions in through here (one rule for which files count, :func:`find_submissions`, and
one for which assignment a notebook is, :func:`assignment_slug`); nothing of a submission is
extracted to disk.
"""

from __future__ import annotations

import hashlib
import re
import stat
import zipfile
from pathlib import Path

import nbformat

from autograder.limits import MAX_COMPRESSION_RATIO, MAX_NOTEBOOK_BYTES, RATIO_FREE_BYTES

SUBMISSION_SUFFIXES = (".ipynb", ".zip")
#: What an assignment name in a notebook's metadata may look like (it becomes part of a path).
SLUG_PATTERN = re.compile(r"[a-z0-9][a-z0-9_]*")
#: A zip entry is inflated this much at a time (within the limits of autograder.limits).
ZIP_CHUNK_BYTES = 1 << 20


def find_submissions(folder: Path) -> tuple[list[Path], list[Path]]:
    """(gradable files, other files) under ``folder``, hidden files and folders (checkpoints) skipped."""
    gradable, other = [], []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or any(part.startswith(".") for part in rel.parts):
            continue
        (gradable if path.suffix.lower() in SUBMISSION_SUFFIXES else other).append(path)
    return gradable, other


def find_upload(folder: Path) -> Path:
    """The one submission in an upload folder (Gradescope's): its one notebook (any depth), else
    its one zip, which must hold the notebook."""
    gradable, _ = find_submissions(folder)
    notebooks = [p for p in gradable if p.suffix.lower() == ".ipynb"]
    if len(notebooks) == 1:
        return notebooks[0]
    zips = [p for p in gradable if p.suffix.lower() == ".zip"]
    if not notebooks and len(zips) == 1:
        return zips[0]
    raise InvalidSubmission(f"the upload holds {len(notebooks)} notebooks and {len(zips)} zips; upload the one zip "
                            "that export_submission(grader) wrote, or the one notebook")


def submission_id(path: Path, folder: Path) -> str:
    return path.relative_to(folder).as_posix().replace("/", "__")


def sha256(path: Path) -> str:
    with open(path, "rb") as f:  # in chunks: an upload can be any size
        return hashlib.file_digest(f, "sha256").hexdigest()


class InvalidSubmission(Exception):
    """The file is not something we can grade (not a notebook, corrupted, wrong assignment)."""


def read_submission_notebook(path: Path):
    """Load the notebook of a submission (.ipynb, or a .zip holding exactly one)."""
    try:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                text = _notebook_in_zip(zf)
        else:
            if path.stat().st_size > MAX_NOTEBOOK_BYTES:
                raise InvalidSubmission(f"the notebook is {path.stat().st_size >> 20} MB; at most "
                                        f"{MAX_NOTEBOOK_BYTES >> 20} MB is graded (clear large outputs)")
            text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except InvalidSubmission:
        raise
    except zipfile.BadZipFile:
        raise InvalidSubmission("not a valid zip file (corrupted or truncated upload?)") from None
    except UnicodeDecodeError:
        raise InvalidSubmission("the notebook is not UTF-8 text") from None
    except Exception as err:  # nbformat / json errors come in many types
        reason = str(err).splitlines()[0][:200]
        raise InvalidSubmission(f"not a readable Jupyter notebook: {type(err).__name__}: {reason}") from None
    return nb


def _notebook_in_zip(zf: zipfile.ZipFile) -> str:
    """The text of the one notebook in a submission zip; nothing is extracted to disk."""
    for info in zf.infolist():
        parts = info.filename.replace("\\", "/").split("/")
        if info.filename.startswith("/") or ".." in parts:
            raise InvalidSubmission(f"the zip holds an entry with an unsafe path ({info.filename[:80]!r})")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise InvalidSubmission(f"the zip holds a symbolic link ({info.filename[:80]!r}); upload the files themselves")
    names = [i for i in zf.infolist() if i.filename.endswith(".ipynb") and "/." not in "/" + i.filename]
    if len(names) != 1:
        raise InvalidSubmission(f"the zip holds {len(names)} notebooks; expected exactly one")
    if names[0].file_size > MAX_NOTEBOOK_BYTES:
        raise InvalidSubmission(f"the notebook in the zip is {names[0].file_size >> 20} MB; at most "
                                f"{MAX_NOTEBOOK_BYTES >> 20} MB is graded")
    return _inflate(zf, names[0]).decode("utf-8")


def _inflate(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """An entry's bytes, inflated a chunk at a time, so that its header's sizes are not trusted:
    a zip that claims a small entry and inflates to gigabytes stops at the notebook limit (or at an
    implausible compression ratio) with a reason, never after root's memory has held it whole."""
    data = bytearray()
    with zf.open(info) as stream:
        while chunk := stream.read(ZIP_CHUNK_BYTES):
            data += chunk
            if len(data) > MAX_NOTEBOOK_BYTES:
                raise InvalidSubmission(f"the notebook in the zip inflates to more than {MAX_NOTEBOOK_BYTES >> 20} MB; "
                                        f"at most {MAX_NOTEBOOK_BYTES >> 20} MB is graded")
            if len(data) > RATIO_FREE_BYTES and len(data) > MAX_COMPRESSION_RATIO * max(info.compress_size, 1):
                raise InvalidSubmission(f"the notebook in the zip inflates more than {MAX_COMPRESSION_RATIO} times "
                                        "(a zip bomb?); zip the notebook again with export_submission(grader)")
    return bytes(data)


def has_outputs(nb) -> bool:
    """Whether the notebook was saved after it ran (any code cell with an output)."""
    return any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code")


def assignment_of(nb) -> str | None:
    return nb.metadata.get("otter", {}).get("assignment_name")


def assignment_slug(nb, override: str | None = None, known: list[str] | None = None) -> str:
    """The assignment a submission is graded as: ``override`` (``--assignment``), else the one its
    notebook's metadata names. InvalidSubmission, saying what to do, when neither names one, when
    the name could not be an assignment's (it becomes part of a path), or when ``known`` is given
    and it is not among them."""
    slug = override or assignment_of(nb)
    if not slug:
        raise InvalidSubmission("the notebook does not say which assignment it is (no otter metadata); "
                                "pass --assignment SLUG")
    if not isinstance(slug, str) or not SLUG_PATTERN.fullmatch(slug):
        raise InvalidSubmission(f"the notebook names the assignment {str(slug)[:60]!r}, which is not an "
                                "assignment name (lowercase letters, digits and _)")
    if known is not None and slug not in known:
        raise InvalidSubmission(f"the notebook names the assignment {slug!r}, which is not an assignment of this "
                                f"course ({', '.join(known)}); pass --assignment SLUG")
    return slug
