"""The report page: one self-contained HTML file (figures as data URIs, styles inline, no script,
and a Content-Security-Policy that forbids every fetch), readable from disk in any browser."""

from __future__ import annotations

import base64
import html
import io
import os
import urllib.parse
from collections import Counter
from pathlib import Path

#: The histogram's bars: a colour of their own, which nothing else on the page uses.
HIST_COLOR = "#3d78c2"
#: The page may load nothing: images only from data: URIs, styles only inline.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; form-action 'none'; base-uri 'none'"

STYLE = """
:root { --ink:#1d2430; --muted:#5b6575; --line:#d9dee6; --soft:#f4f6f9; --accent:#2f5d9e; --warn:#b3401a;
        --warnbg:#fff3ec; --ok:#2d7a46; --mark:#ffe08a; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--ink);
       margin: 0; background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 18px 22px 60px; }
header h1 { font-size: 1.6em; margin: 0 0 4px; }
.sub { color: var(--muted); margin: 0; overflow-wrap: anywhere; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid var(--line); padding: 8px 0; z-index: 2;
      display: flex; flex-wrap: wrap; gap: 6px 18px; }
nav a { color: var(--accent); text-decoration: none; font-weight: 600; }
h2 { margin: 34px 0 8px; font-size: 1.3em; border-bottom: 2px solid var(--ink); padding-bottom: 3px; }
h3 { margin: 22px 0 6px; font-size: 1.05em; }
p.why { color: var(--muted); margin: 4px 0 12px; max-width: 80ch; }
.scroll { overflow-x: auto; margin: 8px 0 14px; }
table { border-collapse: collapse; min-width: 100%; font-size: 0.92em; }
th, td { text-align: left; padding: 5px 9px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--soft); font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.flagged td { background: var(--warnbg); }
table.tests td:first-child { min-width: 15em; }
table.tests td:last-child { min-width: 14em; }
table.tests th { white-space: normal; }
.flag { color: var(--warn); font-weight: 600; }
.quiet { color: var(--muted); }
.tag { display: inline-block; font-size: 0.8em; padding: 0 6px; border-radius: 8px; background: var(--soft);
       border: 1px solid var(--line); white-space: nowrap; }
.bar { display: flex; align-items: center; gap: 6px; min-width: 120px; }
.bar i { flex: 1; min-width: 60px; height: 0.9em; background: var(--soft); border: 1px solid var(--line);
         border-radius: 3px; overflow: hidden; }
.bar i span { display: block; height: 100%; background: var(--accent); }
.bar b { width: 3.2em; text-align: right; font-weight: 500; font-size: 0.9em; font-variant-numeric: tabular-nums; }
.bar.bad i span { background: var(--warn); }
.notes { border: 1px solid #e8b9a3; background: var(--warnbg); padding: 8px 14px; border-radius: 6px; margin: 14px 0; }
.notes li { margin: 2px 0; overflow-wrap: anywhere; }
.lead { border-left: 4px solid var(--warn); background: var(--warnbg); padding: 8px 12px; margin: 10px 0; }
figure { margin: 10px 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 0.9em; }
code, pre, .code { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.88em; }
code.msg { overflow-wrap: anywhere; }
.most { font-weight: 400; color: var(--muted); }
details { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; padding: 4px 10px; }
details > summary { cursor: pointer; font-weight: 600; padding: 3px 0; }
.pair { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 4px 10px; margin: 8px 0; }
.pair .head { font-weight: 600; overflow-wrap: anywhere; }
.pair pre { margin: 0; padding: 6px 8px; background: var(--soft); border-radius: 4px; overflow-x: auto;
            white-space: pre; }
.pair pre mark { background: var(--mark); }
.pair .cell { color: var(--muted); font-size: 0.8em; }
dl.graded { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; }
dl.graded dt { font-weight: 600; }
dl.graded dd { margin: 0; overflow-wrap: anywhere; }
@media (max-width: 760px) {
  main { padding: 10px 10px 40px; }
  .pair { grid-template-columns: minmax(0, 1fr); }
  dl.graded { grid-template-columns: 1fr; }
  dl.graded dd { margin-bottom: 6px; }
  th, td { padding: 4px 6px; }
}
"""


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def name(text: str) -> str:
    """An identifier that may wrap after its underscores (test names are long), never inside a word."""
    return f"<code>{esc(text).replace('_', '_<wbr>')}</code>"


def message(text: str) -> str:
    return f'<code class="msg">{esc(text)}</code>'


def pct(share: float | None) -> str:
    return "–" if share is None else f"{100 * share:.0f}%"


def num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:.0f}"


def bar(share: float, bad: bool = False) -> str:
    width = max(0.0, min(1.0, share)) * 100
    return (f'<div class="bar{" bad" if bad else ""}"><i><span style="width:{width:.1f}%"></span></i>'
            f"<b>{pct(share)}</b></div>")


def link(path: Path | None, text: str, base: Path) -> str:
    """A link to a file beside the report, relative so the folder can move together."""
    if path is None:
        return esc(text)
    href = urllib.parse.quote(os.path.relpath(path, base).replace(os.sep, "/"))
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def table(header: list[str], rows: list[str], numeric: set[int] = frozenset(), cls: str = "") -> str:
    heads = "".join(f'<th{" class=num" if i in numeric else ""}>{esc(h)}</th>' for i, h in enumerate(header))
    return (f'<div class="scroll"><table{f" class={cls}" if cls else ""}><thead><tr>{heads}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def row(cells: list[str], numeric: set[int] = frozenset(), cls: str = "") -> str:
    tds = "".join(f'<td{" class=num" if i in numeric else ""}>{c}</td>' for i, c in enumerate(cells))
    return f'<tr{f" class={cls}" if cls else ""}>{tds}</tr>'


def histogram(totals: list[float], possible: float, narrow: bool = False) -> str:
    """The totals as a histogram, a PNG data URI (matplotlib, Agg: no display needed); ``narrow``
    draws it for a phone-sized window, where the wide one's labels would be too small to read."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    top = max([possible, *totals, 1.0])
    fig, ax = plt.subplots(figsize=(4.2, 3.2) if narrow else (8, 2.8), dpi=130, layout="constrained")
    values = sorted(set(totals))
    if len(values) <= 60:  # one bar per total that occurs: 21 and 22 points never share a bar
        gaps = [b - a for a, b in zip(values, values[1:])] or [1.0]
        width = 0.8 * min(1.0, min(gaps))
        counts = Counter(totals)
        ax.bar(values, [counts[v] for v in values], width=width, color=HIST_COLOR)
    else:
        ax.hist(totals, bins=40, range=(0, top), color=HIST_COLOR, edgecolor="white", linewidth=0.6)
    if totals:
        mean = sum(totals) / len(totals)
        ax.axvline(mean, color="#b3401a", linestyle="--", linewidth=1.2, label=f"mean {mean:.1f}")
        ax.legend(loc="upper left", frameon=False, fontsize=9)
    ax.set_xlim(-0.6, top + 0.6)
    ax.set_xlabel(f"total points (of {possible:g})")
    ax.set_ylabel("submissions")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.spines[["top", "right"]].set_visible(False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def page(title: str, subtitle: str, sections: list[tuple[str, str, str]], notes: list[str]) -> str:
    """The whole page: ``sections`` are (anchor, heading, body HTML)."""
    nav = "".join(f'<a href="#{a}">{esc(h)}</a>' for a, h, _ in sections)
    noted = ""
    if notes:
        items = "".join(f"<li>{esc(n)}</li>" for n in notes)
        noted = (f'<div class="notes" id="input-notes"><b>Read with care: {len(notes)} problem(s) with the input'
                 f"</b> (the report is made from everything else; files are named within the results and "
                 f'submissions folders of "What graded")<ul>{items}</ul></div>')
    body = "".join(f'<section id="{a}"><h2>{esc(h)}</h2>{b}</section>' for a, h, b in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="referrer" content="no-referrer">'
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>"
            f'<body><main><header><h1>{esc(title)}</h1><p class="sub">{subtitle}</p></header>'
            f"<nav>{nav}</nav>{noted}{body}</main></body></html>\n")
