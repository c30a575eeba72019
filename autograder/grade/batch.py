"""The records of one run over a folder of submissions, for ``course grade`` and ``course pdf`` alike.

Every submission the intake finds (:func:`autograder.grade.submissions.find_submissions`) gets exactly one
record, saved atomically under ``OUT/<records>/<submission id>.json`` as soon as it is made, so an
interrupted (even killed) run resumes where it stopped: the caller reuses a saved record while it
still holds. :meth:`Batch.work` makes the others ``jobs`` at a time under a progress bar. A batch
owns no sandbox: the caller opens one and hands it to what makes a record.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tqdm.auto import tqdm

from autograder.grade.results import write_atomically
from autograder.grade.submissions import find_submissions, submission_id
from autograder.layout import CourseError


@dataclass
class Batch:
    submissions: Path
    out: Path
    records: str  # the folder of saved records under ``out``
    jobs: int = 2
    force: bool = False  # make every record anew

    def find(self, log=print) -> list[Path]:
        """The gradable files, in order; a missing folder or none found is the instructor's error."""
        if not self.submissions.is_dir():
            raise CourseError(f"submissions folder {self.submissions} does not exist")
        found, others = find_submissions(self.submissions)
        if others:
            log(f"note: {len(others)} file(s) are neither .ipynb nor .zip and are left out: "
                + ", ".join(str(p.relative_to(self.submissions)) for p in others[:5]) + (" ..." if len(others) > 5 else ""))
        if not found:
            raise CourseError(f"no .ipynb or .zip submissions under {self.submissions}")
        return found

    def saved(self, found: list[Path]) -> dict[Path, dict]:
        """The records earlier runs saved for ``found`` that can be read (none with ``force``); the
        caller keeps those that still hold."""
        if self.force:
            return {}
        records = {}
        for path in found:
            try:
                name = submission_id(path, self.submissions)
                records[path] = json.loads((self.out / self.records / f"{name}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
        return records

    def save(self, record: dict) -> dict:
        folder = self.out / self.records
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(folder / f"{record['submission']}.json", json.dumps(record, indent=1))
        return record

    def _made_and_saved(self, make: Callable[[Path], dict], path: Path) -> dict:
        return self.save(make(path))  # in the worker: a record is on disk the moment it exists

    def work(self, todo: list[Path], make: Callable[[Path], dict], *, desc: str, unit: str = "submission") -> dict[Path, dict]:
        """``make(path)`` for every path of ``todo``, ``jobs`` at a time, each record saved as soon as
        it is made."""
        records = {}
        with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as workers:
            futures = {workers.submit(self._made_and_saved, make, path): path for path in todo}
            for future in tqdm(as_completed(futures), total=len(futures), desc=desc, unit=unit, disable=not todo):
                records[futures[future]] = future.result()
        return records
