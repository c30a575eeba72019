"""``course pdf`` and ``helpers.pdf``: each written answer lands in its own submission's PDF and
under its own bookmark of the merged file; plots come along; hostile text never breaks a PDF;
unreadable submissions get a notice page and a log line; reruns skip what is done."""

import base64
import io
import json
import os
import re
import shutil
import subprocess
import zipfile

import nbformat
import numpy as np
import pytest
from pypdf import PdfReader

from autograder.cli import main as course
from autograder.pdf import PdfMaker, manual_questions_of
from helpers.pdf import manual_questions, render_pdf

pytestmark = [pytest.mark.skipif(
    not (shutil.which("xelatex") and shutil.which("pandoc") and shutil.which("pdftotext"))
    and not os.environ.get("COURSE_REQUIRE_LATEX"),
    reason="needs xelatex, pandoc and poppler (CI installs them and sets COURSE_REQUIRE_LATEX)"),
    pytest.mark.alone]  # xelatex's budgets and a wall-clock bound: nothing in the background (conftest)

HOSTILE = r"""Costs 100% of $5 & more_things #1 ^ ~ \ { unbalanced } } {
A lone dollar $x and a broken command \notacommand{ and \\ \\
Ça déjà naïve Ærøskøbing; 注意力机制 很好; emoji 🙂🚀 and ✓
"""
BROKEN_MATH = r"""$$\begin{align} \frac{1}{ $$ and \end{itemize} for good measure"""


def png_output() -> dict:
    """A display_data output holding a real matplotlib PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [2, 0, 1])
    ax.set_title("PLOTTITLE")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=60)
    plt.close(fig)
    return nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(buffer.getvalue()).decode(),
                                                        "text/plain": "<Figure>"})


def answered(layout, slug: str, tag: str, extra: dict | None = None, figure: bool = True):
    """The committed student notebook of ``slug`` with answer i set to "{tag}-ANSWER-{i}" (or
    ``extra[i]``), and a plot and a printout in the code cell right above the first question."""
    nb = nbformat.read(layout.student_dir(slug) / f"{slug}.ipynb", as_version=4)
    answers = [c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]
    for i, cell in enumerate(answers):
        cell.source = (extra or {}).get(i, f"My answer {tag}-ANSWER-{i} is this.")
    if figure:
        question = manual_questions(nb)[0]
        above = question.context[-1]
        above.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"row sums {tag}-PRINTED\n"), png_output()]
        above.execution_count = 1
    return nb


def text_of(pdf, first: int | None = None, last: int | None = None) -> str:
    pages = [] if first is None else ["-f", str(first + 1), "-l", str((last if last is not None else first) + 1)]
    return subprocess.run(["pdftotext", "-layout", *pages, str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def outline(pdf) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """(title, page, [(child title, page)]) of a PDF's bookmarks."""
    reader = PdfReader(pdf)
    result, items = [], reader.outline
    for index, item in enumerate(items):
        if isinstance(item, list):
            continue
        kids = items[index + 1] if index + 1 < len(items) and isinstance(items[index + 1], list) else []
        result.append((item.title, reader.get_destination_page_number(item),
                       [(k.title, reader.get_destination_page_number(k)) for k in kids if not isinstance(k, list)]))
    return result


def images(pdf) -> int:
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    return sum(line.split()[2] == "image" for line in listing.strip().splitlines()[2:])


@pytest.fixture(scope="module")
def made(layout, submissions, tmp_path_factory):
    """A folder of submissions, PDFs made once with --jobs 2. Bob's is the solved student notebook
    saved without outputs: it runs sealed (kernel_attention's autograder comes from the session's build)."""
    folder = tmp_path_factory.mktemp("pdf_submissions")
    nbformat.write(answered(layout, "kernel_attention", "ALICE"), folder / "alice.ipynb")
    bob = nbformat.read(submissions[0] / "samples" / "complete.ipynb", as_version=4)
    for i, cell in enumerate(c for c in bob.cells if "otter_answer_cell" in c.metadata.get("tags", [])):
        cell.source = f"My answer BOB-ANSWER-{i} is this."
    nbformat.write(bob, folder / "bob.ipynb")
    with zipfile.ZipFile(folder / "carol.zip", "w") as zf:  # an export zip: notebook and otter's PDF
        zf.writestr("summarization.ipynb", nbformat.writes(answered(layout, "summarization", "CAROL")))
        zf.writestr("summarization.pdf", b"%PDF-1.4 not really")
    (folder / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    with zipfile.ZipFile(folder / "empty.zip", "w") as zf:
        zf.writestr("notes.txt", "no notebook here")
    out = folder.parent / "pdfs"
    maker = PdfMaker(layout, folder, out, jobs=2)
    records = {r["submission"]: r for r in maker.run(log=lambda *_: None)}
    return folder, out, maker, records


def test_each_submission_gets_a_pdf_with_its_own_answers_only(made, layout):
    _, out, _, records = made
    for name, tag, slug in (("alice.ipynb", "ALICE", "kernel_attention"), ("bob.ipynb", "BOB", "kernel_attention"),
                            ("carol.zip", "CAROL", "summarization")):
        record = records[name]
        assert record["status"] == "ok" and record["assignment"] == slug, record
        text = text_of(out / record["pdf"])
        questions = manual_questions_of(layout.master(slug))
        for i, (question, _) in enumerate(questions):
            assert f"{tag}-ANSWER-{i}" in text, (name, question)
            assert question in text  # each question headed with its name and prompt
        assert not re.search(r"(ALICE|BOB|CAROL)-ANSWER", text.replace(tag, ""))
    assert "ALICE-PRINTED" in text_of(out / records["alice.ipynb"]["pdf"])  # the printout above question 1


def test_a_notebook_saved_without_outputs_is_run_sealed_and_says_so(made):
    _, out, _, records = made
    bob = records["bob.ipynb"]
    assert bob["executed"] is True and bob["message"].startswith("saved without outputs; run for this PDF"), bob
    text = text_of(out / bob["pdf"])
    assert "Saved without outputs: the plots and printouts below come from running the notebook" in text
    assert "timing: 3 steps in" in text  # a printout of the run (kernel_attention's causal timing, fast setting)
    assert images(out / bob["pdf"]) >= 4  # the plots of the run (inline figures, not Agg's nothing)


def test_the_merged_file_has_a_bookmark_per_submission_and_question_pointing_at_its_answer(made, layout):
    _, out, maker, records = made
    merged = out / "kernel_attention.pdf"
    marks = outline(merged)
    assert [title for title, _, _ in marks] == ["alice.ipynb", "bob.ipynb"]
    for (title, page, questions), tag in zip(marks, ("ALICE", "BOB")):
        assert title in text_of(merged, page)
        names = manual_questions_of(layout.master("kernel_attention"))
        assert len(questions) == len(names)
        for i, ((heading, question_page), (name, _)) in enumerate(zip(questions, names)):
            assert name in heading
            # the answer is on the page the bookmark opens, or on the next (a question may start low on a page)
            assert f"{tag}-ANSWER-{i}" in text_of(merged, question_page, min(question_page + 1, len(PdfReader(merged).pages) - 1))
    per_submission = sum(len(PdfReader(out / records[n]["pdf"]).pages) for n in ("alice.ipynb", "bob.ipynb"))
    assert maker.merged["kernel_attention"] == len(PdfReader(merged).pages) == per_submission


def test_unreadable_submissions_get_a_notice_page_and_a_log_line(made):
    _, out, maker, records = made
    for name in ("broken.ipynb", "empty.zip"):
        assert records[name]["status"] == "failed" and records[name]["message"]
    log = (out / "pdf-log.txt").read_text()
    assert "broken.ipynb: NOT RENDERED: not a readable Jupyter notebook" in log
    assert "empty.zip: NOT RENDERED: the zip holds 0 notebooks" in log
    assert "alice.ipynb" not in log and "bob.ipynb" not in log  # rendered whole, from outputs they had or got: no line
    # two assignments are present and the files' folder names none: their notices go to unassigned.pdf
    marks = outline(out / "unassigned.pdf")
    assert [title for title, _, _ in marks] == ["broken.ipynb (not rendered)", "empty.zip (not rendered)"]
    assert "could not be rendered" in text_of(out / "unassigned.pdf", marks[0][1])
    assert maker.merged["unassigned"] == 2


def test_pages_are_not_blank_and_the_plot_is_on_the_first_question_page(made):
    from PIL import Image

    _, out, _, records = made
    for merged in ("kernel_attention.pdf", "summarization.pdf", "unassigned.pdf"):
        folder = out / f"png-{merged}"
        folder.mkdir()
        subprocess.run(["pdftoppm", "-r", "30", "-gray", str(out / merged), str(folder / "p")], check=True)
        for page in sorted(folder.iterdir()):
            inked = float((np.asarray(Image.open(page)) < 200).mean())
            assert inked > 0.005, f"{merged} {page.name} is blank"
    assert images(out / records["alice.ipynb"]["pdf"]) == 1  # the one plot, above question 1


def test_a_rerun_skips_unchanged_submissions_and_remakes_a_changed_one(made, layout):
    folder, out, _, records = made
    before = {n: (out / r["pdf"]).stat().st_mtime_ns for n, r in records.items() if r["status"] == "ok"}
    nbformat.write(answered(layout, "kernel_attention", "BOBBY"), folder / "bob.ipynb")
    said = []
    again = {r["submission"]: r for r in PdfMaker(layout, folder, out, jobs=2).run(log=said.append)}
    assert any("4 submission(s) unchanged" in line for line in said), said
    assert (out / again["alice.ipynb"]["pdf"]).stat().st_mtime_ns == before["alice.ipynb"]
    assert (out / again["bob.ipynb"]["pdf"]).stat().st_mtime_ns != before["bob.ipynb"]
    assert "BOBBY-ANSWER-0" in text_of(out / "kernel_attention.pdf")


def test_hostile_text_renders_and_only_the_broken_latex_is_set_as_plain_text(layout, tmp_path):
    long_line = "values = [" + ", ".join(str(i) for i in range(60)) + "]  # ENDOFLONGLINE"
    nb = answered(layout, "kernel_attention", "EVE", extra={0: HOSTILE, 1: BROKEN_MATH + " EVE-ANSWER-1",
                                                            2: "Fine: $\\sum_j \\exp(q \\cdot k_j)$ EVE-ANSWER-2"})
    questions = manual_questions(nb)
    questions[0].context[-1].outputs.insert(0, nbformat.v4.new_output(
        "stream", name="stdout", text="\x1b[31mred warning\x1b[0m and a tab\there " + long_line.replace("END", "PRINTEDEND") + "\n"))
    code = next(c for q in questions for c in q.cells if c.cell_type == "code")  # a plot cell inside a question
    code.source = long_line + "\n" + code.source
    rendered = render_pdf(nb, tmp_path / "eve.pdf", title="eve_ü_%_&.ipynb",
                          names=manual_questions_of(layout.master("kernel_attention")))
    assert rendered.verbatim == ["q2_denominator"]  # the broken LaTeX alone; the hostile text is escaped
    text = text_of(tmp_path / "eve.pdf")
    for piece in ("100% of $5 & more_things #1", "Ça déjà naïve", "注意力机制", "EVE-ANSWER-1", "\\frac{1}{",
                  "EVE-ANSWER-2", "red warning", "eve_ü_%_&.ipynb"):
        assert piece in text, piece
    assert "[31m" not in text
    # long lines of code and of printed text wrap instead of running off the page
    assert "ENDOFLONGLINE" in text and "PRINTEDENDOFLONGLINE" in text
    assert "\U0001F642" in text or "[U+1F642]" in text  # an emoji is drawn, or at least named


def test_gradescope_layout_starts_every_question_on_its_own_page(layout, tmp_path):
    nb = answered(layout, "kernel_attention", "GRACE")
    rendered = render_pdf(nb, tmp_path / "grace.pdf", title="grace", pagebreaks=True,
                          names=manual_questions_of(layout.master("kernel_attention")))
    pages = [page for _, _, kids in outline(tmp_path / "grace.pdf") for _, page in kids]
    assert len(pages) == 8 and pages == sorted(set(pages)), pages
    assert rendered.pages == pages[-1] + 1  # no page after the last question's


def test_without_latex_course_pdf_says_what_to_install(made, layout, monkeypatch, capsys):
    folder, out, _, _ = made
    monkeypatch.setenv("PATH", "/nonexistent")
    assert course(["--course", str(layout.root), "pdf", str(folder), "--out", str(out / "none")]) == 2
    said = capsys.readouterr().err
    assert "xelatex" in said and "apt-get install texlive-xetex" in said


def test_records_say_what_was_made(made):
    _, out, _, records = made
    saved = json.loads((out / "records" / "alice.ipynb.json").read_text())
    assert saved["status"] == "ok" and saved["pages"] >= 1 and saved["sha256"] == records["alice.ipynb"]["sha256"]


def test_every_assignment_gets_a_pdf_of_its_written_answers(layout, tmp_path):
    """One answered student notebook per assignment that exists, in one folder: each gets its own
    PDF with every written question's heading, the student's answer and the plot above question 1."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    slugs = layout.slugs()
    for k, slug in enumerate(slugs):
        nbformat.write(answered(layout, slug, f"S{k}"), folder / f"student{k}_{slug}.ipynb")
    records = {r["submission"]: r for r in PdfMaker(layout, folder, tmp_path / "pdfs", jobs=2).run(log=lambda *_: None)}
    for k, slug in enumerate(slugs):
        record = records[f"student{k}_{slug}.ipynb"]
        assert record["status"] == "ok" and record["assignment"] == slug, record
        pdf = tmp_path / "pdfs" / record["pdf"]
        text = text_of(pdf)
        questions = manual_questions_of(layout.master(slug))
        assert questions, slug
        for i, (question, _) in enumerate(questions):
            assert f"S{k}-ANSWER-{i}" in text and question in text, (slug, question)
        assert f"S{k}-PRINTED" in text and images(pdf) == 1, slug


def test_markdown_reads_as_jupyterlab_shows_it(layout, tmp_path):
    """A list typed right under a line of text is a list in JupyterLab; so it is in the PDF (it used
    to run into one paragraph). Tables, fenced code and both kinds of math too."""
    answer = ("My points:\n- ALPHAITEM first\n- BETAITEM second\n\n| COLA | COLB |\n|---|---|\n| CELL1 | CELL2 |\n\n"
              "```python\nCODELINE = 1\n```\n\nInline $a_j$ and display $$\\sum_j a_j$$ MATHEND")
    nb = answered(layout, "kernel_attention", "LIST", extra={0: answer}, figure=False)
    render_pdf(nb, tmp_path / "list.pdf", title="list", names=manual_questions_of(layout.master("kernel_attention")))
    lines = [line.strip() for line in text_of(tmp_path / "list.pdf").splitlines()]
    alpha = next(i for i, line in enumerate(lines) if "ALPHAITEM" in line)
    assert "BETAITEM" not in lines[alpha] and any("BETAITEM" in line for line in lines[alpha + 1:alpha + 3]), lines
    assert "My points:" not in lines[alpha]  # the list starts on its own line
    assert any("COLA" in line and "COLB" in line for line in lines) and any("CELL1" in l and "CELL2" in l for l in lines)
    assert any("CODELINE = 1" in line for line in lines) and any("MATHEND" in line for line in lines)
    assert not any("$$" in line or "```" in line or "|---|" in line for line in lines)


def test_a_pathological_answer_is_set_within_the_budget_and_keeps_its_text(layout, tmp_path):
    """A 1,500-character word, CJK, emoji, TeX specials and display math in one answer: the PDF is
    made within the typesetting budget, and every piece of the answer is in it."""
    import time

    from helpers.pdf import ALONE_SECONDS, TYPESET_SECONDS

    word = "".join(chr(ord("a") + i % 26) for i in range(1500))
    answer = (f"WORDSTART{word}WORDEND then 注意力机制 🙂 and 100% of $5 & #1 ^ ~ \\ {{ }}\n\n"
              "$$\\sum_{j=1}^{T} \\exp(q_i^\\top k_j) \\frac{1}{2}$$ PATHOLOGICALEND")
    nb = answered(layout, "kernel_attention", "PATH", extra={0: answer}, figure=False)
    started = time.monotonic()
    rendered = render_pdf(nb, tmp_path / "path.pdf", title="path",
                          names=manual_questions_of(layout.master("kernel_attention")))
    assert time.monotonic() - started < TYPESET_SECONDS + ALONE_SECONDS + 30
    text = "".join(text_of(tmp_path / "path.pdf").split())  # the word wraps: compare without the breaks
    for piece in ("WORDSTART", word[:200], word[-200:], "WORDEND", "注意力机制", "100%of$5&#1", "PATHOLOGICALEND"):
        assert piece in text, piece
    assert rendered.pages >= 1


def test_a_graded_folder_lends_its_executed_notebooks_and_nothing_runs_again(layout, submissions, tmp_path, monkeypatch):
    """`course grade` keeps a notebook saved without outputs as its sealed run executed it; `course
    pdf --graded` takes those outputs and starts no sandbox. A notebook saved with outputs keeps its own."""
    from autograder.grade.grader import Grader, Limits
    from autograder.grade.results import ResultsFolder

    folder = tmp_path / "class"
    folder.mkdir()
    bob = nbformat.read(submissions[0] / "samples" / "complete.ipynb", as_version=4)
    for i, cell in enumerate(c for c in bob.cells if "otter_answer_cell" in c.metadata.get("tags", [])):
        cell.source = f"My answer BOB-ANSWER-{i} is this."
    nbformat.write(bob, folder / "bob.ipynb")
    nbformat.write(answered(layout, "kernel_attention", "ALICE"), folder / "alice.ipynb")
    results = tmp_path / "results"
    rows = {r["submission"]: r for r in Grader(layout, folder, results, Limits(), jobs=2).run(log=lambda *_: None)}
    assert rows["bob.ipynb"]["status"] == "ok" and rows["bob.ipynb"]["total"] == rows["bob.ipynb"]["possible"]
    kept = ResultsFolder(results)
    assert kept.executed_of("bob.ipynb").is_file() and not kept.executed_of("alice.ipynb").exists()

    def no_run(*args, **kwargs):
        raise AssertionError("course pdf ran a notebook the grading run had executed")

    monkeypatch.setattr(PdfMaker, "executed", no_run)
    maker = PdfMaker(layout, folder, tmp_path / "pdfs", jobs=2, graded=results)
    records = {r["submission"]: r for r in maker.run(log=lambda *_: None)}
    bob_record = records["bob.ipynb"]
    assert bob_record["status"] == "ok" and bob_record["from_grading_run"] is True, bob_record
    text = text_of(tmp_path / "pdfs" / bob_record["pdf"])
    assert "come from its sealed grading run" in text and "BOB-ANSWER-0" in text
    assert "timing: 3 steps in" in text and images(tmp_path / "pdfs" / bob_record["pdf"]) >= 4  # the run's printouts and plots
    assert "ALICE-PRINTED" in text_of(tmp_path / "pdfs" / records["alice.ipynb"]["pdf"])  # her own outputs
    assert maker.from_grading_run({"submission": "bob.ipynb", "sha256": "0" * 64}) is None  # changed since: not taken


def test_answers_are_set_apart_and_a_blank_one_says_no_answer(layout, tmp_path):
    from helpers.core.pdf import PLACEHOLDER

    nb = answered(layout, "kernel_attention", "DAN", extra={1: f"_{PLACEHOLDER}_", 2: "   "})
    rendered = render_pdf(nb, tmp_path / "dan.pdf", title="dan.ipynb", lines=[])
    text = text_of(tmp_path / "dan.pdf")
    questions = manual_questions(nb)
    assert text.count("Answer\n") >= len(questions)  # each answer under its own label
    assert "DAN-ANSWER-0" in text and text.count("No answer.") == 2 and PLACEHOLDER not in text
    assert rendered.pages >= 1 and "DAN-PRINTED" in text_of(tmp_path / "dan.pdf", 0)  # the plot's question starts on page 1
