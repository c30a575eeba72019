"""One run over a folder of submissions, for ``course grade`` and ``course pdf`` alike.

Every submission the intake finds (:func:`autograder.grade.submissions.find_submissions`) gets exactly one
record, saved atomically under ``OUT/<records>/<submission id>.json`` as soon as it is made, so an
interrupted (even killed) run resumes where it stopped: a rerun reuses a saved record while the
caller says it still holds. The work runs ``jobs`` at a time under a progress bar. The sandboxes are
started once, on first use (:meth:`Batch.sandboxes`), and closed when the run ends.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tqdm.auto import tqdm

from autograder.grade.results import write_atomically
from autograder.grade.submissions import find_submissions, submission_id
from autograder.layout import CourseError
from autograder.sandbox.seal import SandboxUnavailable
from autograder.sandbox.session import SandboxPool


@dataclass
class Batch:
    submissions: Path
    out: Path
    records: str  # the folder of saved records under ``out``
    jobs: int = 2
    force: bool = False  # make every record anew
    pool_options: dict = field(default_factory=dict)  # SandboxPool's keywords (threads, mode, private)
    _pool: "SandboxPool | SandboxUnavailable | None" = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

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

    def submission_id(self, path: Path) -> str:
        return submission_id(path, self.submissions)

    def saved(self, path: Path) -> dict | None:
        """The record saved for ``path`` by an earlier run, if one can be read."""
        try:
            return json.loads((self.out / self.records / f"{self.submission_id(path)}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def save(self, record: dict) -> dict:
        folder = self.out / self.records
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(folder / f"{record['submission']}.json", json.dumps(record, indent=1))
        return record

    def sandboxes(self) -> SandboxPool:
        """The run's sandboxes, started on first use; SandboxUnavailable (every time) if none can start."""
        with self._lock:
            if self._pool is None:
                pool = SandboxPool(self.jobs, **self.pool_options)
                try:
                    self._pool = pool.start()
                except SandboxUnavailable as err:
                    self._pool = err
        if isinstance(self._pool, SandboxUnavailable):
            raise self._pool
        return self._pool

    def run(self, make: Callable[[Path], dict], holds: Callable[[Path, dict], bool], *, reused: str,
            desc: str, unit: str = "submission", before: Callable[[list[Path]], None] | None = None,
            log=print) -> list[dict]:
        """A record for every submission, in the intake's order: a saved one where ``holds(path,
        record)`` (and not ``force``), else ``make(path)``, saved as soon as it is made. ``reused``
        is the note logged for the saved ones ("{n} submission(s) ..."); ``before(todo)`` runs
        once before any work (to start the sandboxes and say which seal)."""
        found = self.find(log)
        records, todo = {}, []
        for path in found:
            record = None if self.force else self.saved(path)
            if record is not None and holds(path, record):
                records[path] = record
            else:
                todo.append(path)
        if records:
            log(reused.format(n=len(records)))
        try:
            if before is not None:
                before(todo)
            with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as workers:
                futures = {workers.submit(lambda p: self.save(make(p)), path): path for path in todo}
                for future in tqdm(as_completed(futures), total=len(futures), desc=desc, unit=unit, disable=not todo):
                    records[futures[future]] = future.result()
        finally:
            if isinstance(self._pool, SandboxPool):
                self._pool.close()
        return [records[path] for path in found]
