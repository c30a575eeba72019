"""``course report``: the statistics on held-out-style batches, the code comparison on real
notebooks, the page in a headless browser, and bad input. Nothing here grades a notebook: rows
are made from the variants (``tests/<slug>_variants.py``), notebooks from the master and the
student notebook (``tests/support/report_batches.py``)."""

from __future__ import annotations

import json
import random
import re
import shutil
import socket
import subprocess
import threading
import zipfile
from pathlib import Path

import nbformat
import pytest
from tests.support.report_batches import (disguised_copy, master_tests, mistake, solved, synthetic_row, template, variants,
                            with_variant, write_results)

from autograder.cli import main
from autograder.platforms.gradescope import gradescope_results, invalid_results
from autograder.layout import Layout
from autograder.report.compose import make_reports
from autograder.report.html import CSP, HIST_COLOR
from autograder.report.inputs import read_batch
from autograder.report.similarity import NEAR_FROM
from autograder.report.stats import normalise, by_test
from autograder.grade.results import RUN_FILE
from tests.support.notebook_edits import edited_functions

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

REPO = Path(__file__).resolve().parents[2]
SLUG = "kernel_attention"
LAYOUT = Layout(REPO)


def variant_rows(slug: str, broken: str | None = None, seed: int = 0) -> list[dict]:
    """Rows of a class: the reference, every correct variant (full marks), every wrong variant
    (failing what it must lose), two untouched notebooks; ``broken`` fails for every one of them."""
    wrong, correct = variants(slug)
    tests, rng = master_tests(slug), random.Random(seed)
    rows = []

    def add(name, failing):
        failed = {test: mistake(test, rng) for test in failing}
        if broken:
            failed[broken] = mistake(broken, rng)
        rows.append(synthetic_row(name, tests, failed, slug))

    add("reference", [])
    for variant in correct:
        add(f"correct_{variant['name']}", [])
    for variant in wrong:
        add(f"wrong_{variant['name']}", variant["must_lose"] + variant.get("must_fail_public", []))
    everything = [case["test"] for cases in tests.values() for case in cases]
    for i in range(2):
        rows.append(synthetic_row(f"untouched_{i}", tests, {t: "raised NameError" for t in everything}, slug))
    return rows


def hidden_tests(slug: str) -> list[str]:
    return [case["test"] for cases in master_tests(slug).values() for case in cases if case["hidden"] and case["points"]]


def graded_from(rows):
    from autograder.report.inputs import Graded

    return [Graded(r["submission"], r["assignment"], r["status"], r["message"], r["total"], r["possible"],
                   r["scores"], [{"question": q, **c} for q, d in r["questions"].items() for c in d["cases"]],
                   {q: d["possible"] for q, d in r["questions"].items()}) for r in rows]


# ------------------------------------------------------------------------------------------- tests


def test_normalising_puts_one_mistake_together():
    first = normalise("softmax/out: values differ from the reference: largest error 0.31 at index (0, 2) "
                      "(tolerance rtol=1e-05, atol=1e-06)")
    second = normalise("softmax/out: values differ from the reference: largest error 0.27 at index (1, 0, 3) "
                       "(tolerance rtol=1e-05, atol=1e-06)")
    assert first == second and "0.31" not in first
    assert normalise("NameError: name 'q' is not defined") == normalise("NameError: name 'scores' is not defined")
    assert normalise("at index (np.int64(0), np.int64(4))") == normalise("at index (3, 1)")
    assert normalise("shape (4, 8) but the reference has shape (4, 8)") != normalise("raised NameError")


@pytest.mark.parametrize("slug", ["kernel_attention", "karate_gnn", "pretraining"])
def test_a_broken_hidden_test_comes_first_among_the_flagged(slug):
    for broken in hidden_tests(slug)[::3]:
        stats = by_test(graded_from(variant_rows(slug, broken)))
        assert stats[0].test == broken, (broken, [(t.test, t.flags) for t in stats[:3]])
        assert any("strong submissions fail it" in flag for flag in stats[0].flags)


@pytest.mark.parametrize("slug", ["kernel_attention", "karate_gnn", "pretraining"])
def test_no_test_is_called_bad_when_none_is(slug):
    stats = by_test(graded_from(variant_rows(slug)))
    assert not [t.test for t in stats if any("strong submissions" in f for f in t.flags)]


def similar_batch(slug: str, folder: Path) -> tuple[str, str]:
    """The reference, half of the correct variants one to a notebook, a student who wrote the other
    half their own way, and a disguised copy of that student (renamed variables, functions in
    reverse order, two cells swapped). Returns the copied pair."""
    base = solved(slug)
    folder.mkdir(parents=True)
    nbformat.write(base, folder / "reference.ipynb")
    student, used = base, set()
    for index, variant in enumerate(variants(slug)[1]):
        names = set(edited_functions(variant))
        if index % 2 and not names & used:
            student, used = with_variant(student, variant), used | names
        else:
            nbformat.write(with_variant(base, variant), folder / f"{variant['name']}.ipynb")
    nbformat.write(student, folder / "student.ipynb")
    nbformat.write(disguised_copy(student, template(slug)), folder / "student_copy.ipynb")
    return "student.ipynb", "student_copy.ipynb"


def report_of(folder: Path, slug: str, out: Path, rows: list[dict] | None = None, **kwargs) -> tuple[Path, list[str]]:
    """Results for every notebook in ``folder`` (all passing unless ``rows`` are given) and the report."""
    tests = master_tests(slug)
    rows = rows or [synthetic_row(p.name, tests, {}, slug) for p in sorted(folder.glob("*.ipynb"))]
    write_results(out, rows, folder)
    notes = []
    pages = make_reports(out, layout=LAYOUT, log=notes.append, **kwargs)
    return pages[0], notes


def listed_pairs(page: str) -> list[tuple[str, str]]:
    similar = page[page.index('id="similar"'):page.index('id="graded"')]
    return [(a, b) for a, b in re.findall(r"<tr><td class=num>\d+</td><td><a [^>]*>([^<]*)</a></td><td><a [^>]*>"
                                          r"([^<]*)</a>", similar)]


@pytest.mark.parametrize("slug", sorted(Layout(REPO).slugs()))
def test_a_disguised_copy_is_the_first_pair_and_honest_variants_are_not_listed(slug, tmp_path):
    pair = similar_batch(slug, tmp_path / "submissions")
    page, _ = report_of(tmp_path / "submissions", slug, tmp_path / "results")
    assert listed_pairs(page.read_text(encoding="utf-8")) == [pair]


def test_three_copies_of_one_source_are_reported_as_a_group(tmp_path):
    """A leaked solution copied by three students: their shared code is too common for the pairs,
    so the page lists the three as one group of copies (and the honest variants in no group)."""
    folder = tmp_path / "submissions"
    student, copy = similar_batch(SLUG, folder)
    nb = nbformat.read(folder / student, as_version=4)
    nbformat.write(disguised_copy(nb, template(SLUG), swap_cells=False), folder / "third_copy.ipynb")
    page, _ = report_of(folder, SLUG, tmp_path / "results")
    text = page.read_text(encoding="utf-8")
    copies = text[text.index('<ul id="copies">'):]
    copies = copies[:copies.index("</ul>")]
    assert re.findall(r"<li>(\d+) submissions", copies) == ["3"]
    assert sorted(re.findall(r"<a [^>]*>([^<]*)</a>", copies)) == sorted([student, copy, "third_copy.ipynb"])
    assert "1 group(s) of copies" in text


@pytest.mark.parametrize("slug", sorted(Layout(REPO).slugs()))
def test_edited_copies_of_one_source_are_one_group_and_honest_variants_stay_apart(slug, tmp_path):
    """Three copies of one student's notebook, the third edited (disguised, and one function the
    student kept from the worked solution written another way): the three are one group; the
    reference and the honest variants, which share most of their code, are in none."""
    folder = tmp_path / "submissions"
    student, copy = similar_batch(slug, folder)
    for variant in variants(slug)[0]:  # more honest students, each with one function their own way
        if len(list(folder.glob("*.ipynb"))) >= NEAR_FROM:
            break
        nbformat.write(with_variant(solved(slug), variant), folder / f"{variant['name']}.ipynb")
    nb = nbformat.read(folder / student, as_version=4)
    kept = [v for i, v in enumerate(variants(slug)[1]) if not i % 2]  # the functions the student did not rewrite
    nb = with_variant(disguised_copy(nb, template(slug), swap_cells=False), kept[0])
    nbformat.write(nb, folder / "edited_copy.ipynb")
    page, _ = report_of(folder, slug, tmp_path / "results")
    text = page.read_text(encoding="utf-8")
    copies = text[text.index('<ul id="copies">'):]
    copies = copies[:copies.index("</ul>")]
    assert sorted(re.findall(r"<a [^>]*>([^<]*)</a>", copies)) == sorted([student, copy, "edited_copy.ipynb"])
    assert "1 group(s) of copies" in text


def test_the_page_says_similarity_is_a_lead_and_shows_the_lines_side_by_side(tmp_path):
    similar_batch(SLUG, tmp_path / "submissions")
    page, _ = report_of(tmp_path / "submissions", SLUG, tmp_path / "results")
    text = page.read_text(encoding="utf-8")
    assert "Similarity is a lead for a person to read, not a verdict." in text
    blocks = re.findall(r'<div class="cell">(A|B), code cells? [\d, ]+</div><pre><mark>(.*?)</mark></pre>', text, re.S)
    assert blocks and {side for side, _ in blocks} == {"A", "B"}
    assert any("beta" in code or "alpha" in code for side, code in blocks if side == "B")  # the renamed copy


# -------------------------------------------------------------------------------------- in a browser


class Proxy:
    """A loopback port that chromium is told to use as its proxy: every request it would make
    arrives here, and is answered with nothing."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.requests: list[str] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.requests.append(conn.recv(300).decode("latin-1").split("\r\n")[0])
                except OSError:
                    pass

    def hosts(self) -> list[str]:
        """The host each request was for ("CONNECT host:443", "GET http://host/...")."""
        found = []
        for line in self.requests:
            target = line.split(" ")[1] if " " in line else line
            found.append(re.sub(r"^\w+://", "", target).split("/")[0].split(":")[0])
        return found

    def close(self):
        self.stopped.set()
        self.thread.join(timeout=5)
        self.sock.close()


def chromium(page: Path, proxy: Proxy, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--proxy-server=http://127.0.0.1:{proxy.port}", "--proxy-bypass-list=<-loopback>",
                           "--disable-background-networking", "--disable-component-update", "--no-first-run",
                           "--disable-extensions", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=120)


def colour_pixels(png: Path, colour: str) -> int:
    from PIL import Image

    rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    with Image.open(png) as image:
        return sum(n for n, pixel in image.convert("RGB").getcolors(1 << 24) if pixel == rgb)


def test_the_page_renders_in_headless_chromium_and_fetches_nothing(tmp_path):
    if shutil.which("chromium") is None:
        message = "chromium is not installed (apt-get install chromium)"
        if __import__("os").environ.get("COURSE_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    similar_batch(SLUG, tmp_path / "submissions")
    rows = variant_rows(SLUG, hidden_tests(SLUG)[0])
    names = sorted(p.name for p in (tmp_path / "submissions").glob("*.ipynb"))
    rows = [{**row, "submission": name, "file": name} for row, name in zip(rows, names)] + rows[len(names):]
    page, _ = report_of(tmp_path / "submissions", SLUG, tmp_path / "results", rows=rows)
    text = page.read_text(encoding="utf-8")
    assert f'content="{CSP}"' in text and "<script" not in text
    assert not re.search(r'(src|href|srcset)="(https?:)?//', text), "the page names something to fetch"
    assert "url(" not in text.split("</style>")[0] and "@import" not in text, "the styles fetch something"
    control = tmp_path / "control.html"  # the same browser must see what a page fetches
    control.write_text('<img src="http://example.com/a.png"><link rel="stylesheet" href="https://cdn.example.org/a.css">')
    proxy = Proxy()
    try:
        chromium(control, proxy, "--dump-dom", "--virtual-time-budget=2000")
        seen_by_control = set(proxy.hosts())
        proxy.requests.clear()
        for name, size in (("laptop", "1366,2200"), ("narrow", "400,2600")):
            done = chromium(page, proxy, f"--screenshot={tmp_path / name}.png", f"--window-size={size}")
            assert (tmp_path / f"{name}.png").is_file(), done.stderr[-2000:]
        requested = set(proxy.hosts())
    finally:
        proxy.close()
    assert {"example.com", "cdn.example.org"} <= seen_by_control
    # Chromium asks its update and sign-in services for things by itself, whatever the page. A page
    # without script can only fetch a URL written in it: no host it names may have been asked for.
    named = set(re.findall(r"(?:https?:)?//([\w.-]+)", text))
    assert not requested & named, f"the report made requests: {sorted(requested & named)}"
    for name in ("laptop", "narrow"):
        shot = tmp_path / f"{name}.png"
        assert colour_pixels(shot, HIST_COLOR) > 400, f"{name}: no histogram bars drawn"
        assert colour_pixels(shot, "#2f5d9e") > 300, f"{name}: no share bars in the tables"


# -------------------------------------------------------------------------------------------- bad input


@pytest.fixture()
def small_results(tmp_path):
    """A results folder of eight submissions (notebooks and rows), and the submissions."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    base = solved(SLUG)
    for i in range(7):
        nbformat.write(base, folder / f"s{i}.ipynb")
    nbformat.write(base, folder / "Ada Lovelace (late).ipynb")  # a name as students choose them
    nbformat.write(template(SLUG), folder / "blank.ipynb")  # a submission without code of its own
    tests = master_tests(SLUG)
    rng = random.Random(1)
    failing = hidden_tests(SLUG)[:2]
    rows = [synthetic_row(f"s{i}.ipynb", tests, {t: mistake(t, rng) for t in failing[: i % 3]}, SLUG) for i in range(7)]
    rows.append(synthetic_row("blank.ipynb", tests, {}, SLUG, "timeout", "did not finish within 300 s"))
    rows.append(synthetic_row("Ada Lovelace (late).ipynb", tests, {}, SLUG, "error", "the cell starting 'x' raised "
                              "ValueError: no"))
    write_results(tmp_path / "results", rows, folder)
    return tmp_path / "results", folder


def made(results: Path, **kwargs) -> tuple[str, list[str]]:
    notes = []
    pages = make_reports(results, layout=LAYOUT, log=notes.append, **kwargs)
    return pages[0].read_text(encoding="utf-8"), notes


def test_a_complete_folder_reports_without_notes_but_the_empty_notebook(small_results):
    results, _ = small_results
    page, notes = made(results)
    assert [n for n in notes if "blank.ipynb" not in n] == []
    assert any("blank.ipynb" in n and "no code of its own" in n for n in notes)
    assert page.count("<table") >= 5 and "data:image/png;base64," in page
    assert 'href="feedback/blank.ipynb.txt"' in page  # the timed-out one links to its feedback
    assert 'href="feedback/Ada%20Lovelace%20%28late%29.ipynb.txt"' in page


def test_a_truncated_results_json_is_named_and_the_rows_are_read_instead(small_results):
    results, _ = small_results
    text = (results / "results.json").read_text()
    (results / "results.json").write_text(text[: len(text) // 2])
    page, notes = made(results)
    assert any("results.json: not valid JSON at line" in n and "rows/*.json instead" in n for n in notes), notes
    assert "9 submission(s)" in page


def test_a_hand_edited_row_is_named_and_left_out(small_results):
    results, _ = small_results
    rows = json.loads((results / "results.json").read_text())
    rows[2]["total"] = "eleven"
    del rows[3]["scores"]
    (results / "results.json").write_text(json.dumps(rows))
    page, notes = made(results)
    assert any("results.json row 3 (s2.ipynb): 'total' is str" in n for n in notes), notes
    assert any("results.json row 4 (s3.ipynb): no 'scores'" in n for n in notes), notes
    assert "7 submission(s)" in page


def test_results_of_another_version_are_named(small_results):
    results, _ = small_results
    run = json.loads((results / RUN_FILE).read_text())
    (results / RUN_FILE).write_text(json.dumps({**run, "format": 99}))
    (results / "rows" / "s4.ipynb.json").unlink()
    rows = json.loads((results / "results.json").read_text())
    assert rows[1]["format"] == 1  # every row says its format
    rows[1]["format"] = 7
    (results / "results.json").write_text(json.dumps(rows))
    page, notes = made(results)
    assert any("run.json: written by another version of course grade (format 99" in n for n in notes), notes
    assert any("results.json row 2 (s1.ipynb): written by another version of course grade (row format 7" in n
               for n in notes), notes
    assert "9 submission(s)" in page  # read as far as it matches, not left out
    assert any("s4.ipynb.json: missing; its tests are left out" in n for n in notes), notes
    (results / RUN_FILE).unlink()
    page, notes = made(results)
    assert any("run.json: missing (results of an older course grade)" in n for n in notes), notes
    assert "Not compared:" in page  # without run.json, the submissions are not found...
    page, notes = made(results, submissions=small_results[1])
    assert "Not compared:" not in page  # ... unless they are named


def test_a_missing_feedback_file_is_named_and_not_linked(small_results):
    results, _ = small_results
    (results / "feedback" / "blank.ipynb.txt").unlink()
    page, notes = made(results)
    assert any("note: feedback/blank.ipynb.txt: missing" in n for n in notes), notes
    assert 'href="feedback/blank.ipynb.txt"' not in page and ">blank.ipynb<" in page


def test_a_missing_or_unreadable_submission_is_named(small_results):
    results, folder = small_results
    (folder / "s1.ipynb").unlink()
    (folder / "s2.ipynb").write_text('{"cells": [')
    (folder / "s3.ipynb").unlink()  # s3 and s4 handed in zips: one with the notebook, one without
    (folder / "s4.ipynb").unlink()
    with zipfile.ZipFile(folder / "s3.zip", "w") as zf:
        zf.writestr("kernel_attention.ipynb", nbformat.writes(solved(SLUG)))
    with zipfile.ZipFile(folder / "s4.zip", "w") as zf:
        zf.writestr("answers.txt", "I could not save the notebook")
    rows = json.loads((results / "results.json").read_text())
    for row in rows:
        row["file"] = row["file"].replace("s3.ipynb", "s3.zip").replace("s4.ipynb", "s4.zip")
    (results / "results.json").write_text(json.dumps(rows))
    _, notes = made(results)
    assert any("s1.ipynb: not found" in n for n in notes), notes
    assert any("s2.ipynb: not a readable notebook" in n for n in notes), notes
    assert any("s4.zip: not a readable notebook (the zip holds 0 notebooks" in n for n in notes), notes
    assert not any("s3.zip" in n for n in notes), notes


def test_the_command_prints_the_page_and_several_assignments_get_one_each(small_results, capsys):
    results, _ = small_results
    rows = json.loads((results / "results.json").read_text())
    rows.append({**rows[0], "submission": "other.ipynb", "assignment": "karate_gnn"})
    (results / "results.json").write_text(json.dumps(rows))
    assert main(["--course", str(REPO), "report", str(results), "--out", str(results / "class.html")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(results / "class-karate_gnn.html"), str(results / "class-kernel_attention.html")]


# ------------------------------------------------------------------------------------------ Gradescope


def test_gradescope_results_are_read_back_as_they_were_written():
    """One module writes Gradescope's results and reads them back: the row's own fields come back
    from extra_data, the cases from the tests, hidden ones as hidden."""
    from autograder.platforms.gradescope import read_results

    row = synthetic_row("alice.ipynb", master_tests(SLUG), {hidden_tests(SLUG)[0]: "off by 0.5"}, SLUG)
    row.update(sandbox="posix", autograder_sha256="ab12", limits={"timeout": 300}, graded_at="2026-11-27T10:00:00+00:00")
    read = read_results(json.loads(json.dumps(gradescope_results(row, 12))))
    assert {k: read["extra"][k] for k in ("assignment", "status", "autograder_sha256", "limits", "graded_at")} == \
        {k: row[k] for k in ("assignment", "status", "autograder_sha256", "limits", "graded_at")}
    assert (read["status"], read["message"], read["sandbox"], read["total"]) == (row["status"], row["message"], "posix",
                                                                                  row["total"])
    written = [(q, c["test"], c["hidden"], c["passed"]) for q, d in sorted(row["questions"].items()) for c in d["cases"]]
    assert [(c["question"], c["test"], c["hidden"], c["passed"]) for c in read["cases"]] == written
    assert read_results(invalid_results("not a notebook"))["status"] == "invalid"


def test_a_folder_of_gradescope_results_is_reported(tmp_path):
    """One folder per submission with its results.json (as the autograder zip writes it) and the
    upload beside it, as Gradescope's export has them; an older results.json without extra_data,
    an invalid upload and a truncated file among them."""
    tests, rng = master_tests(SLUG), random.Random(2)
    broken = hidden_tests(SLUG)[1]
    folder = tmp_path / "gradescope"
    pair = similar_batch(SLUG, tmp_path / "uploads")
    for index, upload in enumerate(sorted((tmp_path / "uploads").glob("*.ipynb"))):
        row = synthetic_row(upload.name, tests, {broken: mistake(broken, rng)}, SLUG)
        result = gradescope_results({**row, "sandbox": "posix"}, 30)
        if index:  # the first as an older autograder wrote it
            result["extra_data"] = {"assignment": SLUG, "status": "ok", "message": "", "sandbox": "posix",
                                    "limits": {"timeout": 300}, "graded_at": "2026-02-01T09:00:00+00:00"}
        (folder / upload.stem).mkdir(parents=True)
        (folder / upload.stem / "results.json").write_text(json.dumps(result))
        shutil.copy(upload, folder / upload.stem / upload.name)
    (folder / "bad_upload").mkdir()
    (folder / "bad_upload" / "results.json").write_text(json.dumps(invalid_results("not a notebook")))
    (folder / "cut").mkdir()
    (folder / "cut" / "results.json").write_text('{"score": 3, "tests": [')
    batch = read_batch(folder, assignment=SLUG)
    assert {g.status for g in batch.graded} == {"ok", "invalid"}
    assert any("cut/results.json: not valid JSON" in line for line in batch.notes.lines(base=folder))
    notes = []
    page = make_reports(folder, tmp_path / "gs.html", assignment=SLUG, layout=LAYOUT, log=notes.append)[0]
    text = page.read_text(encoding="utf-8")
    tests_section = text[text.index('id="tests"'):text.index('id="mistakes"')]
    first = re.search(r"<tr class=flagged><td><code>(.*?)</code>", tests_section).group(1)
    assert first.replace("<wbr>", "") == broken
    assert listed_pairs(text) == [tuple(name.removesuffix(".ipynb") for name in pair)]
    assert "posix" in text[text.index('id="graded"'):]


def test_workers_read_code_as_this_process_does(tmp_path):
    """From 200 submissions on the code is read in forked workers: their fingerprints (and the
    template's, taken here) must agree with the ones read here, and the copy still comes first."""
    from autograder.report.inputs import Notes
    from autograder.report.similarity import read_codes, similar_pairs

    base = solved(SLUG)
    given = {c.source for c in template(SLUG).cells if c.cell_type == "code"}
    own = [i for i, c in enumerate(base.cells) if c.cell_type == "code" and c.source not in given]
    rng = random.Random(3)
    for n in range(210):
        nb = nbformat.from_dict(json.loads(json.dumps(base)))
        for i in rng.sample(own, 6):
            line = f"tolerance_{n} = max({rng.random():.5f}, {rng.random():.4f} ** {n}) + min({rng.random():.3f}, 1)"
            nb.cells[i].source = line + "\n" + nb.cells[i].source
        (tmp_path / f"s{n:03d}.ipynb").write_text(json.dumps(nb))
    copy = disguised_copy(nbformat.reads((tmp_path / "s007.ipynb").read_text(), as_version=4), template(SLUG))
    (tmp_path / "s999.ipynb").write_text(json.dumps(copy))
    entries = [(p.name, p) for p in sorted(tmp_path.glob("*.ipynb"))]
    cells = [c.source for c in template(SLUG).cells if c.cell_type == "code"]
    alone = read_codes(entries, cells, Notes(), processes=1)
    forked = read_codes(entries, cells, Notes(), processes=2)
    assert [c.fingerprint.hash_idx for c in alone] == [c.fingerprint.hash_idx for c in forked]
    pairs = similar_pairs(forked)
    assert (pairs[0].a.name, pairs[0].b.name) == ("s007.ipynb", "s999.ipynb")


def test_every_submission_is_one_click_from_the_page_with_its_score_and_status(small_results):
    """Not only those that failed something: every graded submission is listed, linked to its feedback,
    with its total; an error that cost no point is explained; the spread of the totals is given."""
    results, _ = small_results
    page, _ = made(results)
    every = page.split('id="every"', 1)[1]
    for name in [f"s{i}.ipynb" for i in range(7)] + ["blank.ipynb"]:
        assert f'href="feedback/{name}.txt"' in every, name
    assert 'href="feedback/Ada%20Lovelace%20%28late%29.ipynb.txt"' in every
    assert "standard deviation" in page and "Status other than ok (2)" in page


def test_a_correlation_flag_needs_enough_submissions_on_each_side_and_says_how_many():
    from autograder.report.inputs import Graded
    from autograder.report.stats import FEWEST_EACH_SIDE, by_test

    def graded(failing: int, n: int = 14) -> list[Graded]:
        found = []
        for i in range(n):
            fails = i < failing  # those who fail "t" do better on "other"
            cases = [{"question": "q1", "test": "t", "hidden": True, "points": 1, "passed": not fails, "message": ""},
                     {"question": "q2", "test": "other", "hidden": True, "points": 10, "passed": True, "message": ""}]
            other = 10 if fails else (i % 3) * 4
            cases[1]["passed"] = other == 10
            found.append(Graded(f"s{i}", "a", "ok", "", (0 if fails else 1) + other, 11, {}, cases=cases))
        return found

    few = next(s for s in by_test(graded(FEWEST_EACH_SIDE - 2)) if s.test == "t")
    assert not any("lower score elsewhere" in f for f in few.flags), few.flags
    enough = next(s for s in by_test(graded(FEWEST_EACH_SIDE + 1)) if s.test == "t")
    flag = next(f for f in enough.flags if "lower score elsewhere" in f)
    assert f"on {14 - FEWEST_EACH_SIDE - 1} passing and {FEWEST_EACH_SIDE + 1} failing submissions" in flag
