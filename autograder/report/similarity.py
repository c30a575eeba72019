"""Similar submissions: pairs whose student-written code is much alike, for a person to read.

Only the code a student wrote counts: a line of a code cell that the assignment's student notebook
(the template) also holds is given code and left out, so every pair does not match on the template.
What is left is read as Python tokens and written in a normal form (names as ``V``, a defined
function as ``F``, strings as ``S``; keywords, operators, numbers and attribute names as written), so
renamed variables, comments and layout change nothing. The fingerprints are copydetect's: its k-gram
hashes and robust winnowing (MOSS's, Schleimer, Wilkerson and Aiken 2003), and its ``compare_files``
measures the overlap of two submissions and where it lies. Only the index from fingerprint to
position is built here, in plain integers (copydetect's ``CodeFingerprint`` builds it from numpy
scalars, which made 2,000 submissions take four times as long).
Fingerprints found in many submissions (more than :func:`common_limit`) are left out too, as MOSS
does: code that most of a class writes alike is no sign of copying, and reordered functions still
match because fingerprints do not depend on order.
"""

from __future__ import annotations

import builtins
import functools
import io
import json
import keyword
import multiprocessing
import os
import tokenize
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from copydetect import compare_files
from copydetect.utils import hashed_kgrams, winnow

from autograder.report.inputs import Notes

#: k-gram length in normal-form characters (copydetect's noise threshold) and winnowing window:
#: any common run of at least K + WINDOW - 1 characters (about two lines) is found.
K, WINDOW = 25, 8
#: A pair is listed when at least this share of each one's own code matches the other's, and at
#: least MIN_MATCHED normal-form characters (a few lines) match: one small function in common is
#: not much alike, two notebooks that are mostly the same are.
LISTED_FROM, MIN_MATCHED = 0.5, 60
#: At most this many pairs are shown.
MOST_PAIRS = 30
_BUILTINS = set(dir(builtins))
_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def common_limit(n: int) -> int:
    """A fingerprint in more submissions than this is common code (MOSS's -m is 10 by default;
    a small batch uses a tenth of its size, and at least 2, so a pair is never common)."""
    return max(2, min(10, n // 10))


@dataclass
class Code:
    """A submission's own code: its lines (cell number, text) and its normal form, each character
    of which points back to a line."""

    name: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    normal: str = ""
    forms: list[str] = field(default_factory=list)  # each own line's normal form (lines' order)
    line_of: np.ndarray | None = None  # normal-form position -> index into lines
    starts: np.ndarray | None = None  # normal-form positions where a run of own lines begins
    fingerprint: "Fingerprint | None" = None


def code_cells(path: Path) -> list[str]:
    """The code cells of a submitted notebook (.ipynb, or the one in a .zip), read as plain JSON."""
    if path.suffix == ".zip":
        from autograder.grade.submissions import _notebook_in_zip  # the intake's checks; imported here, as nbformat is slow to

        with zipfile.ZipFile(path) as zf:
            text = _notebook_in_zip(zf)
    else:
        text = path.read_text(encoding="utf-8")
    cells = json.loads(text)["cells"]
    sources = [c.get("source", "") for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]
    return ["".join(s) if isinstance(s, list) else str(s) for s in sources]


@dataclass
class Given:
    """What the template gives: its cells as they are, its lines as written, their normal forms."""

    cells: set[str] = field(default_factory=set)
    lines: set[str] = field(default_factory=set)
    forms: set[str] = field(default_factory=set)


def given_code(template_cells: list[str]) -> Given:
    return Given(set(template_cells), {line.strip() for source in template_cells for line in source.splitlines()},
                 {form for source in template_cells for form in line_forms(source).values()})


@functools.lru_cache(maxsize=1 << 17)
def line_form(line: str) -> str:
    """The normal form of one line of code (read on its own: a statement that runs over several
    lines is read in pieces, which is the same for every submission)."""
    parts, previous = [], None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type not in _SKIPPED:
                parts.append(_normal(tok, previous))
                previous = tok
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # an open bracket or string at the end of the line: what was read so far
    return "".join(parts)


def line_forms(source: str) -> dict[int, str]:
    """Line number -> the normal form of that line (comment-only and blank lines: none)."""
    forms = {}
    for number, line in enumerate(source.splitlines(), 1):
        form = line_form(line.strip()) if line.strip() and not line.lstrip().startswith("#") else ""
        if form:
            forms[number] = form
    return forms


def normal_form(cells: list[str], given: Given, name: str = "") -> Code:
    """The student-written lines of ``cells`` (those whose normal form no template line has, so a
    given line with its names changed is still given) and their normal form."""
    code = Code(name)
    pieces, owners, starts = [], [], []
    for cell_number, source in enumerate(cells, 1):
        if source in given.cells:
            continue
        broken = True  # a run of own lines ends at a given line and at the end of a cell
        for line in source.splitlines():
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            form = "" if stripped in given.lines else line_form(stripped)
            if not form or form in given.forms:
                broken = True
                continue
            if broken:
                starts.append(len(owners))
                broken = False
            owners.extend([len(code.lines)] * len(form))
            code.lines.append((cell_number, line))
            pieces.append(form)
    code.normal, code.forms = "".join(pieces), pieces
    code.line_of = np.array(owners, dtype=np.int32)
    code.starts = np.array(starts[1:], dtype=np.int64)
    return code


def _normal(tok, previous) -> str:
    if tok.type == tokenize.NAME:
        if keyword.iskeyword(tok.string) or tok.string in _BUILTINS:
            return tok.string
        if previous is not None and previous.string in ("def", "class"):
            return "F" if previous.string == "def" else "O"
        if previous is not None and previous.string == ".":
            return tok.string  # an attribute or method: what a copier cannot rename
        return "V"
    if tok.type == tokenize.STRING:
        return "S"
    return tok.string


@dataclass
class Fingerprint:
    """A document's fingerprints in the form copydetect's ``compare_files`` reads (its
    ``CodeFingerprint`` has these attributes): each selected k-gram hash -> where it starts."""

    filtered_code: str
    hash_idx: dict[int, list[int]]
    k: int = K
    offsets: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    hashes: set = field(default_factory=set)
    token_coverage: int = 0

    def recount(self) -> None:
        """The set of fingerprints and how much of the document they cover, after a change."""
        self.hashes = set(self.hash_idx)
        covered = np.zeros(len(self.filtered_code) + self.k, dtype=bool)
        starts = np.fromiter((p for ps in self.hash_idx.values() for p in ps), dtype=np.int64)
        for offset in range(self.k):
            covered[starts + offset] = True
        self.token_coverage = int(covered[:len(self.filtered_code)].sum())


def fingerprint(code: Code, boilerplate: np.ndarray | None) -> Code:
    """The normal form's k-grams hashed and winnowed by copydetect (robust winnowing, as MOSS),
    less those of the template (``boilerplate``) and those that run from one run of own lines into
    the next: those depend on the order of functions and on the given code between them, which
    says nothing of who wrote them."""
    if len(code.normal) < K:
        return code
    selected, where = winnow(hashed_kgrams(code.normal, K), WINDOW, remove_duplicates=False)
    keep = np.ones(len(where), dtype=bool)
    if code.starts is not None and len(code.starts):
        following = np.searchsorted(code.starts, where, side="right")
        nxt = code.starts[np.minimum(following, len(code.starts) - 1)]
        keep &= (following >= len(code.starts)) | (nxt >= where + K)
    if boilerplate is not None and len(boilerplate):
        keep &= ~np.isin(selected, boilerplate)
    index: dict[int, list[int]] = {}
    for h, position in zip(selected[keep].tolist(), where[keep].tolist()):
        index.setdefault(h, []).append(position)
    code.fingerprint = Fingerprint(code.normal, index)
    code.fingerprint.recount()
    return code


#: The template's given code and fingerprints, for the readers (set before the workers fork).
_SHARED: dict = {"given": Given(), "boilerplate": None}


def _read_one(job) -> tuple[Code | None, str]:
    name, path = job
    given, boilerplate = _SHARED["given"], _SHARED["boilerplate"]
    try:
        cells = code_cells(path)
    except FileNotFoundError:
        return None, "not found; left out of Similar submissions"
    except (zipfile.BadZipFile, UnicodeDecodeError, ValueError, KeyError, TypeError, OSError) as err:
        why = type(err).__name__
    except Exception as err:  # the intake's InvalidSubmission (a zip without one notebook, an unsafe path)
        if type(err).__name__ != "InvalidSubmission":
            raise
        why = str(err)
    else:
        code = normal_form(cells, given, name)
        if len(code.normal) < K:
            return None, "no code of its own (only the template's cells); nothing to compare"
        return fingerprint(code, boilerplate), ""
    return None, f"not a readable notebook ({why[:120]}); left out of Similar submissions"


def read_codes(entries: list[tuple[str, Path]], template_cells: list[str] | None, notes: Notes,
               processes: int | None = None) -> list[Code]:
    """The fingerprinted code of each (name, submitted file); unreadable or empty ones noted."""
    given = given_code(template_cells or [])
    boilerplate = None
    if template_cells:
        whole = normal_form(template_cells, Given(), "template")
        boilerplate = np.array(sorted(fingerprint(whole, None).fingerprint.hashes)) if whole.normal else None
    _SHARED.update(given=given, boilerplate=boilerplate)  # forked workers see it without pickling
    jobs = list(entries)
    processes = processes or min(8, os.cpu_count() or 1)
    forks = "fork" in multiprocessing.get_all_start_methods()
    if processes > 1 and len(jobs) >= 200 and forks:  # forked workers share this process's string hashes
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            results = pool.map(_read_one, jobs, chunksize=max(1, len(jobs) // (8 * processes)))
    else:
        results = [_read_one(job) for job in jobs]
    codes = []
    for (name, path), (code, problem) in zip(entries, results):
        if problem:
            notes.add(path, problem)
        else:
            codes.append(code)
    return codes


#: Copies of one source are reported from this many submissions up.
SMALLEST_GROUP = 3
#: Two submissions are copies of one source, edited, when each has at least this share of its
#: distinctive lines (see :func:`copy_groups`) in the other, and they share at least
#: MIN_SHARED_LINES of them: a few lines changed, added or left out keep a copy in its group.
NEAR_SHARE, MIN_SHARED_LINES = LISTED_FROM, 5
#: Near copies are looked for from this many compared submissions up: in a smaller class a quarter
#: of it is too few to tell what the class writes alike from what one source gave several.
NEAR_FROM = 4 * SMALLEST_GROUP


def distinctive_limit(n: int) -> int:
    """A normal-form line found in more than this many of ``n`` submissions is too common to tie
    submissions together: what a quarter of the class writes alike (or code every variant of one
    worked solution keeps) is no sign of one source. At least SMALLEST_GROUP, so a group's own code
    counts; at most 20, so that a large class compares few pairs (a leak copied unchanged by more
    is still one group: its code is the same)."""
    return max(SMALLEST_GROUP, min(n // 4, 20))


def copy_groups(codes: list[Code], smallest: int = SMALLEST_GROUP) -> list[list[str]]:
    """Groups of ``smallest`` or more submissions that are copies of one source, largest first. A
    leaked solution copied by several students is such a group; the pairs cannot show it, since code
    that several submissions share is left out of them as common. Two submissions are tied

    - when their own code is the same once names, comments, layout and the order of its lines are set
      aside (the same normal-form lines, as many times each), or
    - when it is nearly the same: of the lines few others wrote (found in at most
      :func:`distinctive_limit` submissions), each has NEAR_SHARE or more in the other, and at least
      MIN_SHARED_LINES in common; looked for in a class of NEAR_FROM or more. Lines much of the
      class shares say nothing, so honest solutions that all follow one worked example are not tied by them.

    A group is every submission reached through such ties."""
    codes = [code for code in codes if code.forms]  # a submission without code of its own copies nothing
    seen = Counter(form for code in codes for form in set(code.forms))
    limit = distinctive_limit(len(codes))
    rare = [Counter(form for form in code.forms if seen[form] <= limit) for code in codes]
    parent = list(range(len(codes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    same: dict[tuple, int] = {}
    for i, code in enumerate(codes):
        first = same.setdefault(tuple(sorted(code.forms)), i)
        parent[root(i)] = root(first)
    holders: dict[str, list[int]] = {}
    for i, lines in enumerate(rare if len(codes) >= NEAR_FROM else []):  # no near ties in a small class
        for form in lines:
            holders.setdefault(form, []).append(i)
    candidates = {(a, b) for group in holders.values() for x, a in enumerate(group) for b in group[x + 1:]}
    for a, b in candidates:
        shared = sum((rare[a] & rare[b]).values())
        if shared >= MIN_SHARED_LINES and shared >= NEAR_SHARE * max(sum(rare[a].values()), sum(rare[b].values())):
            parent[root(a)] = root(b)
    groups: dict[int, list[str]] = {}
    for i, code in enumerate(codes):
        groups.setdefault(root(i), []).append(code.name)
    found = [sorted(names) for names in groups.values() if len(names) >= smallest]
    return sorted(found, key=lambda names: (-len(names), names))


@dataclass
class Pair:
    a: Code
    b: Code
    share_a: float  # of a's own code, the part found in b
    share_b: float
    matched: int  # normal-form characters of a that match
    rows: list[tuple[list[int], list[int]]]  # matching blocks: (lines of a, lines of b), side by side

    @property
    def score(self) -> float:
        """How alike: the smaller of the two shares (each side's own code found in the other)."""
        return min(self.share_a, self.share_b)


def similar_pairs(codes: list[Code], listed_from: float = LISTED_FROM, most: int = MOST_PAIRS) -> list[Pair]:
    """The pairs whose own code is most alike, most alike first."""
    codes = [c for c in codes if c.fingerprint is not None]
    seen = Counter(h for c in codes for h in c.fingerprint.hashes)
    limit = common_limit(len(codes))
    common = {h for h, n in seen.items() if n > limit}
    holders: dict[int, list[int]] = {}
    for i, code in enumerate(codes):
        fp = code.fingerprint
        if common.intersection(fp.hashes):
            for h in common.intersection(fp.hash_idx):
                del fp.hash_idx[h]
            fp.recount()
        for h in fp.hashes:
            holders.setdefault(h, []).append(i)
    shared: Counter = Counter()
    for group in holders.values():
        for x in range(len(group)):
            for y in range(x + 1, len(group)):
                shared[group[x], group[y]] += 1
    pairs = []
    for (i, j), count in shared.items():
        a, b = codes[i], codes[j]
        if count < 2 or count < 0.5 * listed_from * max(len(a.fingerprint.hashes), len(b.fingerprint.hashes)):
            continue  # cannot reach the listed share: saves comparing every pair that shares a line
        matched, (share_a, share_b), _ = compare_files(a.fingerprint, b.fingerprint)
        if matched >= MIN_MATCHED and min(share_a, share_b) >= listed_from:
            pairs.append(Pair(a, b, float(share_a), float(share_b), int(matched), []))
    pairs.sort(key=lambda p: (-p.score, -p.matched, p.a.name, p.b.name))
    for pair in pairs[:most]:
        pair.rows = side_by_side(pair.a, pair.b)
    return pairs[:most]


def side_by_side(a: Code, b: Code) -> list[tuple[list[int], list[int]]]:
    """Matching blocks of two codes as rows (lines of a, lines of b), in a's order: each stretch
    of a's matched lines beside the stretch of b's that shares most of its fingerprints."""
    fa, fb = a.fingerprint, b.fingerprint
    votes: dict[int, Counter] = {}
    for h in fa.hashes & fb.hashes:
        for pa in fa.hash_idx[h]:
            for pb in fb.hash_idx[h]:
                for la, lb in zip(_lines_at(a, pa), _lines_at(b, pb)):
                    votes.setdefault(la, Counter())[lb] += 1
    rows: list[tuple[list[int], list[int]]] = []
    for la in sorted(votes):
        lb = votes[la].most_common(1)[0][0]
        if rows and la - rows[-1][0][-1] <= 1 and 0 <= lb - rows[-1][1][-1] <= 2:
            rows[-1][0].append(la)
            rows[-1][1].extend(range(rows[-1][1][-1] + 1, lb + 1))
        else:
            rows.append(([la], [lb]))
    return rows


def _lines_at(code: Code, start: int) -> list[int]:
    """The lines a k-gram starting at ``start`` covers (one per line, in order)."""
    owners = code.line_of[start:start + K]
    return list(dict.fromkeys(int(x) for x in owners))
