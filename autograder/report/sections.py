"""The sections of the report page, each a function from the graded submissions to HTML."""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

from autograder.grade.row import UNFINISHED
from autograder.report.html import bar, esc, histogram, link, message, name, num, pct, row, table
from autograder.report.inputs import STATUSES, GradedBatch, Graded
from autograder.report.similarity import LISTED_FROM, NEAR_SHARE, SMALLEST_GROUP, Pair, common_limit
from autograder.report.stats import common_mistakes, question_stats, raising_cells, status_counts, by_test, totals

#: What each status means, for the status table.
STATUS_MEANING = {
    "ok": "graded to the end",
    "error": "graded, but a cell raised or grading stopped early (see the message)",
    "timeout": "stopped at the time limit; tests did not run",
    "memory": "stopped at the memory limit",
    "tampered": "sent results no honest notebook sends; not judged",
    "invalid": "not a gradable notebook (corrupted, wrong assignment, no notebook in the zip)",
}
#: At most this many rows in the list of unfinished submissions and in the test table's flags.
MOST_LISTED = 200


def scores(graded: list[Graded], base: Path) -> str:
    values, possible = totals(graded)
    parts = []
    if values:
        ordered = sorted(values)
        median = ordered[len(ordered) // 2] if len(ordered) % 2 else sum(ordered[len(ordered) // 2 - 1:][:2]) / 2
        mean = sum(values) / len(values)
        spread = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
        parts.append(f'<p class="why">{len(values)} scored submission(s): mean {mean:.2f}, standard deviation '
                     f"{spread:.2f}, median {median:g} of {possible:g} autograded points; "
                     f"{sum(v >= possible > 0 for v in values)} at full marks, {sum(v <= 0 for v in values)} at zero.</p>")
        alt = f"histogram of the total scores of {len(values)} submissions"
        parts.append(f'<figure><picture><source media="(max-width: 760px)" srcset="{histogram(values, possible, True)}">'
                     f'<img src="{histogram(values, possible)}" alt="{alt}" width="1040" height="364"></picture>'
                     "<figcaption>Totals of every scored submission (invalid ones have none).</figcaption></figure>")
    parts.append("<h3>Per question</h3>")
    parts.append('<p class="why">Where the class lost its points: a question with a low mean and many at zero is '
                 "the one to go over again.</p>")
    stats = question_stats(graded)
    parts.append(table(["question", "points", "mean", "median", "at full marks", "at zero"],
                       [row([name(q.question), num(q.possible), num(q.mean), num(q.median),
                             bar(q.full), bar(q.zero, bad=True)], {1, 2, 3}) for q in stats], {1, 2, 3}))
    counts = status_counts(graded)
    parts.append("<h3>Status</h3>")
    parts.append(table(["status", "submissions", "meaning"],
                       [row([f'<span class="tag">{esc(s)}</span>', str(n), esc(STATUS_MEANING.get(s, ""))], {1})
                        for s, n in counts.items()], {1}))
    unfinished = [g for g in graded if g.status != "ok"]
    if unfinished:
        order = {s: i for i, s in enumerate(STATUSES)}
        unfinished.sort(key=lambda g: (order.get(g.status, 99), g.name))
        parts.append(f"<h3>Status other than ok ({len(unfinished)})</h3>")
        parts.append('<p class="why">Each links to the feedback its student got; a timeout or memory stop that '
                     "many share points at the limits rather than at the students.</p>")
        rows = [row([link(g.feedback, g.name, base), f'<span class="tag">{esc(g.status)}</span>',
                     message(g.message[:300])]) for g in unfinished[:MOST_LISTED]]
        parts.append(table(["submission (feedback)", "status", "message"], rows))
        if len(unfinished) > MOST_LISTED:
            parts.append(f"<p>… and {len(unfinished) - MOST_LISTED} more (results.csv lists them all).</p>")
    return "".join(parts)


def every_submission(graded: list[Graded], base: Path) -> str:
    """Every submission, one click from its feedback: its total, its status, and a word where the two
    seem to disagree."""
    ordered = sorted(graded, key=lambda g: g.name)
    rows = [row([link(g.feedback, g.name, base), f"{num(g.total)} / {num(g.possible)}",
                 f'<span class="tag">{esc(g.status)}</span>', message(_explained(g)[:300])], {1}) for g in ordered]
    return ('<p class="why">Every submission graded, by name, each linked to the feedback its student got. '
            "The totals are the autograded points; the written questions are graded by hand.</p>"
            + table(["submission (feedback)", "autograded", "status", "message"], rows, {1}))


def _explained(g: Graded) -> str:
    """The row's message, with a word where points and status seem to disagree."""
    if g.status == "error" and g.possible and g.total >= g.possible:
        return ("every test passed; the error was in a cell no test needs (it costs no points): " + g.message)
    if g.status == "ok" and g.possible and g.total <= 0:
        return g.message or "ran to the end, but no test passed"
    return g.message


def tests(graded: list[Graded]) -> str:
    stats = by_test(graded)
    if not stats:
        return '<p class="why">No test outcomes to show (no rows with test results were read).</p>'
    flagged = sum(1 for t in stats if t.severity >= 1)
    parts = [f'<p class="why">Every public and hidden test over the submissions whose tests ran to the end. "Others" '
             "is a submission's share of the points of every other test: a good test is passed more by those who "
             "do well elsewhere (a positive r). A test that the strongest submissions fail is more often a bad test "
             f"than a bad class: it is flagged and listed first. {flagged} of {len(stats)} tests are flagged.</p>"]
    rows = []
    for t in stats:
        kind = "flag" if t.severity >= 1 else "quiet"  # a public check everybody passes is no alarm
        flags = "".join(f'<div class="{kind}">{esc(f)}</div>' for f in t.flags)
        rows.append(row([name(t.test), name(t.question),
                         f'<span class="tag">{"hidden" if t.hidden else "public"}</span>', num(t.points),
                         bar(t.share, bad=t.share < 0.5), f"{t.passed} / {t.judged}", pct(t.rest_passing),
                         pct(t.rest_failing), num(t.correlation), flags or "–"], {3, 5, 6, 7, 8},
                        "flagged" if t.severity >= 1 else ""))
    parts.append(table(["test", "question", "kind", "points", "pass", "passed", "others if passed",
                        "others if failed", "r", "flags"], rows, {3, 5, 6, 7, 8}, "tests"))
    return "".join(parts)


def mistakes(graded: list[Graded], base: Path) -> str:
    found = common_mistakes(graded)
    parts = ['<p class="why">The problems each test\'s failures name (a failure may name several), grouped after '
             "numbers became # and quoted names '…', so that \"largest error 0.31\" and \"largest error 0.27\" fall "
             "together: what to talk about in the next class. Two example submissions each, linked to their "
             "feedback.</p>"]
    if not found:
        parts.append("<p>No test failed.</p>")
    for index, t in enumerate(found):
        rows = []
        for group in t.groups:
            examples = ", ".join(link(g.feedback, g.name, base) for g, _ in group.examples)
            said = "".join(message(m) for _, m in group.examples[:1])
            rows.append(row([str(group.count), message(group.pattern), said, examples], {0}))
        more = f"<p>… and {t.other_groups} rarer problem(s).</p>" if t.other_groups else ""
        kind = "hidden" if t.hidden else "public"
        top = t.groups[0]
        parts.append(f'<details{" open" if index < 6 else ""}><summary>{name(t.test)} '
                     f"({esc(t.question)}, {kind}): {t.failed} of {t.judged} failed"
                     f'<span class="most"> · most often: {esc(_short(top.pattern, 90))} ({top.count})</span></summary>'
                     + table(["submissions", "problem (normalised)", "as written (first example)", "examples"], rows, {0})
                     + more + "</details>")
    cells = raising_cells(graded)
    parts.append("<h3>Cells that raised</h3>")
    parts.append('<p class="why">The first cell that raised in each notebook, as grading records it, by the first '
                 "line of its code: a cell that raises for many students may need a clearer prompt.</p>")
    if cells:
        rows = [row([message(c.cell), str(c.count),
                     ", ".join(f"{esc(e)} ×{n}" for e, n in c.errors.most_common()),
                     ", ".join(link(g.feedback, g.name, base) for g in c.examples)], {1}) for c in cells[:30]]
        parts.append(table(["cell starting", "notebooks", "error types", "examples"], rows, {1}))
    else:
        parts.append("<p>No cell raised.</p>")
    return "".join(parts)


def similar(pairs: list[Pair], compared: int, graded: int, base: Path, links: dict[str, Path | None],
            reason: str = "", groups: list[list[str]] = ()) -> str:
    parts = ['<div class="lead"><b>Similarity is a lead for a person to read, not a verdict.</b> Students who '
             "follow the same lecture, hint or documentation write alike; code can also be shared with permission. "
             "Read the matching lines side by side before concluding anything, and talk to the students.</div>",
             '<p class="why">Only the code the students wrote is compared: lines that the student notebook gives '
             "are left out, and so is code that more than "
             f"{common_limit(compared)} of the {compared} compared submissions share. Names, comments and layout do "
             f"not count, nor the order of functions. A pair is listed when {pct(LISTED_FROM)} or more of each one's "
             "own code is found in the other (fingerprints by copydetect, the winnowing of MOSS); its similarity is "
             "the smaller of the two shares.</p>"]
    if reason:
        parts.append(f"<p><b>Not compared:</b> {esc(reason)}</p>")
        return "".join(parts)
    parts.append(f"<p>{compared} of {graded} submissions had code of their own to compare; "
                 f"{len(groups)} group(s) of copies and {len(pairs)} pair(s) listed.</p>")
    if groups:
        items = "".join(f"<li>{len(names)} submissions: " + ", ".join(link(links.get(n), n, base) for n in names) + "</li>"
                        for names in groups)
        parts.append(f'<p class="why"><b>Copies of one source</b>: {SMALLEST_GROUP} or more submissions whose own code '
                     "is the same once names, comments, layout and the order of lines are set aside, or nearly the same: "
                     f"of the lines few others wrote, each has {pct(NEAR_SHARE)} or more in the other (a few lines "
                     "edited). Code that several submissions share is left out of the pairs below, so only this shows "
                     f'them.</p><ul id="copies">{items}</ul>')
    if not pairs:
        return "".join(parts)
    rows = [row([str(i + 1), link(links.get(p.a.name), p.a.name, base), link(links.get(p.b.name), p.b.name, base),
                 pct(p.score), pct(p.share_a), pct(p.share_b), str(sum(len(a) for a, _ in p.rows))], {0, 3, 4, 5, 6})
            for i, p in enumerate(pairs)]
    parts.append(table(["#", "submission A (feedback)", "submission B (feedback)", "similarity", "of A's own code",
                        "of B's own code", "matching lines of A"], rows, {0, 3, 4, 5, 6}))
    for i, p in enumerate(pairs):
        blocks = [_code_block("A", p.a, lines_a) + _code_block("B", p.b, lines_b) for lines_a, lines_b in p.rows]
        parts.append(f'<details{" open" if i < 3 else ""}><summary>#{i + 1}: {esc(p.a.name)} and {esc(p.b.name)}, '
                     f"{pct(p.score)}</summary>"
                     f'<div class="pair"><div class="head">A: {esc(p.a.name)}</div><div class="head">B: {esc(p.b.name)}'
                     "</div>" + "".join(blocks) + "</div></details>")
    return "".join(parts)


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most - 1].rstrip() + "…"


def _code_block(side: str, code, indices: list[int]) -> str:
    """Matching lines of one side, labelled with the code cells they are in (counted from 1)."""
    cells = sorted({code.lines[i][0] for i in indices})
    text = esc(textwrap.dedent("\n".join(code.lines[i][1] for i in indices)))
    where = ("code cell " if len(cells) == 1 else "code cells ") + ", ".join(str(c) for c in cells)
    return f'<div><div class="cell">{side}, {where}</div><pre><mark>{text}</mark></pre></div>'


def what_graded(batch: GradedBatch, graded: list[Graded], made_at: str, bundle: str) -> str:
    def counted(values) -> str:
        counts = Counter(v for v in values if v)
        if not counts:
            return "not recorded"
        return "; ".join(f"{esc(v)} ({n} submission{'s' if n != 1 else ''})" for v, n in counts.most_common())

    zips = counted(g.autograder for g in graded)
    if len({g.autograder for g in graded if g.autograder}) > 1:
        zips = '<span class="flag">more than one autograder graded this batch:</span> ' + zips
    seals = counted(g.sandbox or ("unsealed" if g.sealed is False else "") for g in graded)
    limits = counted(", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}"
                               for k, v in sorted(g.limits.items())) if isinstance(g.limits, dict) else ""
                     for g in graded)
    dates = sorted(g.graded_at for g in graded if g.graded_at)
    when = (dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}") if dates else "not recorded"
    items = [("autograder zip (sha256)", zips), ("seal", seals), ("limits", limits), ("graded", esc(when)),
             ("results read", f"{esc(batch.folder)} ({esc(batch.kind)})"),
             ("submissions' code", esc(batch.code_folder or ("beside each results.json" if batch.kind == "Gradescope"
                                                             else "not found"))),
             ("report made", f"{esc(made_at)} by {esc(bundle)}")]
    return ('<p class="why">What produced these numbers: two reports can be compared only when these agree.</p>'
            '<dl class="graded">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>")


def unfinished_share(graded: list[Graded]) -> str:
    n = sum(g.status in UNFINISHED for g in graded)
    return f"{n} did not finish" if n else "all finished"
