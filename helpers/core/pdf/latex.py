"""Text as LaTeX that always typesets: plain text and code escaped character by character and
wrapped at the margin, markdown through pandoc as JupyterLab shows it, and every character the main
font lacks set in a fallback font that has it, or shown as its code point."""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache

__all__: list[str] = []


MAX_LINE_CHARS = 400  # a longer line is cut (it would fill pages with one number list)
COMPILE_SECONDS = 120  # one xelatex run of plain text at most (a safety net: it takes seconds)
#: pandoc's markdown, read as JupyterLab renders it.
MARKDOWN_FORMAT = "markdown-auto_identifiers+tex_math_dollars+raw_tex+lists_without_preceding_blankline+pipe_tables"


#: Fonts tried, in order, for characters the main fonts lack (installed by .ci/run on Debian:
#: fonts-droid-fallback for CJK, fonts-symbola for emoji and symbols).
FALLBACK_FONTS = ("Droid Sans Fallback", "Symbola")
MAIN_FONTS = {"main": "DejaVu Serif", "sans": "DejaVu Sans", "mono": "DejaVu Sans Mono"}


_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#", "%": r"\%",
            "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}"}
_INVISIBLE = {"\u200d", "\ufe0f", "\ufe0e", "\u200b", "\ufeff"}  # joiners and variation selectors
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@lru_cache(maxsize=None)
def _font_chars(family: str) -> frozenset[int] | None:
    """The code points a font installed under ``family`` has, or None when it is not installed."""
    try:
        path = subprocess.run(["fc-match", "--format=%{file}", f"{family}"], capture_output=True, text=True,
                              timeout=20).stdout.strip()
        matched = subprocess.run(["fc-match", "--format=%{family}", f"{family}"], capture_output=True, text=True,
                                 timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    if not path or family.lower() not in matched.lower():
        return None
    from fontTools.ttLib import TTFont

    try:
        with TTFont(path, fontNumber=0, lazy=True) as font:
            return frozenset(font.getBestCmap() or {})
    except Exception:  # an unreadable font file is a missing font
        return None


def _fallbacks() -> list[tuple[str, str, frozenset[int]]]:
    """(LaTeX command, font family, its characters) of each installed fallback font."""
    return [(f"\\fallback{chr(ord('A') + i)}", family, chars) for i, family in enumerate(FALLBACK_FONTS)
            if (chars := _font_chars(family))]


def fontify(latex: str, main: str = "main") -> str:
    """``latex`` with every run of characters its main font lacks switched to a fallback font that
    has them, or replaced by a visible ``[U+XXXX]``. ASCII is never touched."""
    base = _font_chars(MAIN_FONTS[main]) or frozenset(range(0x250))
    fallbacks = _fallbacks()
    out, run, run_font = [], [], None

    def flush():
        if run:
            out.append("{" + run_font + " " + "".join(run) + "}")
            run.clear()

    for ch in latex:
        code = ord(ch)
        if code < 128 or code in base:
            flush()
            out.append(ch)
            continue
        if ch in _INVISIBLE:
            continue
        font = next((name for name, _, chars in fallbacks if code in chars), None)
        if font is None:
            flush()
            out.append(f"\\texttt{{[U+{code:04X}]}}")
            continue
        if font != run_font:
            flush()
            run_font = font
        run.append(ch)
    flush()
    return "".join(out)


def escape(text: str, main: str = "main") -> str:
    """Plain text as LaTeX that typesets it as it is, whatever it holds."""
    text = _ANSI.sub("", text)
    return fontify("".join(_SPECIAL.get(ch, ch) for ch in text), main)


def verbatim(text: str, size: str = r"\small", max_lines: int | None = None, whole_lines: bool = False) -> str:
    """Code or printed text, line breaks kept, long lines wrapped at any character; printed text
    is cut after ``max_lines`` lines (the count of the rest is shown), and a line longer than
    ``MAX_LINE_CHARS`` is cut unless ``whole_lines`` (a student's answer is kept whole)."""
    lines = _ANSI.sub("", text).rstrip("\n").splitlines() or [""]
    shown = [line if whole_lines or len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " ..."
             for line in lines[:max_lines]]
    if max_lines is not None and len(lines) > max_lines:
        shown.append(f"... ({len(lines) - max_lines} more lines)")
    body = "\n".join(escape(line.expandtabs(4), "mono") for line in shown)
    return (f"\\begin{{Verbatim}}[commandchars=\\\\\\{{\\}},breaklines,breakanywhere,fontsize={size}]\n"
            f"{body}\n\\end{{Verbatim}}\n")


#: A run of this many characters with no space (a pasted hash, a URL, a key held down) gets a
#: break opportunity every BREAK_EVERY characters: TeX cannot break it, and a paragraph holding one
#: took xelatex half a minute and more before it gave up.
LONG_WORD = re.compile(r"(?<![^\s(])[^\s`$\\]{80,}")
BREAK_EVERY = 40
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def _breakable(text: str) -> str:
    """``text`` with a LaTeX break opportunity inside every very long word, outside code and math."""
    out, fenced = [], False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and not line.startswith(("    ", "\t")):
            line = LONG_WORD.sub(lambda m: "\\allowbreak{}".join(
                m.group(0)[i:i + BREAK_EVERY] for i in range(0, len(m.group(0)), BREAK_EVERY)), line)
        out.append(line)
    return "\n".join(out)


def markdown_to_latex(texts: list[str]) -> list[str]:
    """Many markdown cells to LaTeX in one pandoc call (one call costs about 0.2 s)."""
    if not texts:
        return []
    marker = "COURSECELLBREAK7f3a"
    joined = f"\n\n{marker}\n\n".join(_breakable(text) for text in texts)
    # headings of an answer sit below the question's (level 3 on), out of the bookmarks
    # --no-highlight: fenced code as plain verbatim (pandoc's highlighting macros need its template)
    result = subprocess.run(["pandoc", "-f", MARKDOWN_FORMAT, "-t", "latex", "--no-highlight",
                             "--wrap=preserve", "--shift-heading-level-by=2"], input=joined, capture_output=True, text=True, timeout=COMPILE_SECONDS)
    if result.returncode != 0:
        raise RuntimeError(f"pandoc failed: {result.stderr.strip()[:300]}")
    parts = [part.strip() for part in result.stdout.split(marker)]
    if len(parts) != len(texts):  # a cell swallowed the marker (inside a code block?): one at a time
        return [markdown_to_latex([text])[0] if len(texts) > 1 else result.stdout for text in texts]
    return [_wrapped_code(part) for part in parts]


_VERBATIM = re.compile(r"\\begin\{verbatim\}\n(.*?)\\end\{verbatim\}", re.DOTALL)


def _wrapped_code(latex: str) -> str:
    """pandoc's LaTeX of one cell, fontified, its code blocks wrapping at the margin (fvextra)
    and left as typed (no font switches inside them)."""
    out, last = [], 0
    for block in _VERBATIM.finditer(latex):
        out.append(fontify(latex[last:block.start()]))
        out.append("\\begin{Verbatim}[breaklines,breakanywhere,fontsize=\\small]\n" + block.group(1) + "\\end{Verbatim}")
        last = block.end()
    out.append(fontify(latex[last:]))
    return "".join(out)
