"""Making the submission zip from inside a notebook.

The zip holds the notebook *file*, as last saved, not what the browser shows. A student who runs
Kernel -> Restart & Run All reaches the export cell before saving, and one who edits an answer
after saving would upload the older answer. ``export_submission`` therefore first asks JupyterLab
to save the notebook (the notebook's save button, pressed from the export cell's output), then
compares the saved file with this kernel's own history and refuses, saying what to do, until they
agree.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["compress_zip", "export_submission", "latex_available", "NotebookNotSaved", "save_from_the_browser",
           "unsaved_run"]

#: What to do, in the words of the notebook's Submit section.
SAVE_AND_RERUN = "Save the notebook now (File -> Save Notebook, or Ctrl+S / Cmd+S), then run this cell again."
#: What to do when the export saved the notebook itself: what is missing is a run, not a save.
RUN_ALL = "Run every cell again (Run -> Run All Cells): the export at the end then sees them all."


class NotebookNotSaved(RuntimeError):
    """The notebook file on disk does not show this kernel's run, so its zip would be stale."""


def _this_kernel():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def unsaved_run(nb_path: str | Path, shell=None, just_saved: bool = False) -> str | None:
    """Why the saved ``nb_path`` does not show the run of this kernel, or None when it does
    (``just_saved``: the export saved it itself, so the advice is to run the cells, not to save).

    Every non-empty code cell of the saved file (but the export cell) must carry an execution
    count whose input, in this kernel's history, is that cell's code: a cell never run, run in an
    earlier kernel, or edited after it ran fails the comparison. Outside IPython there is no
    history to compare with, and nothing is said.
    """
    shell = shell or _this_kernel()
    if shell is None:
        return None
    history = shell.user_ns.get("_ih") or []
    advice = RUN_ALL if just_saved else SAVE_AND_RERUN
    import nbformat  # here, not at the top: importing it costs every notebook two seconds

    nb = nbformat.read(nb_path, as_version=4)
    code = [(n, cell) for n, cell in enumerate(nb.cells, 1) if cell.cell_type == "code" and cell.source.strip()
            and "export_submission(" not in cell.source]
    never = [n for n, cell in code if cell.get("execution_count") is None]
    if len(never) == len(code) and code:
        return (f"{Path(nb_path).name} was saved without outputs: none of its code cells has run in the saved "
                f"file. {advice}")
    for n, cell in code:
        count = cell.get("execution_count")
        if count is None:
            return f"cell {n} of the saved {Path(nb_path).name} has not run (no output). {advice}"
        ran = history[count] if 0 < count < len(history) else None
        if ran is None or ran.strip() != shell.transform_cell(cell.source).strip():
            first_line = cell.source.strip().splitlines()[0][:60]
            return (f"the saved {Path(nb_path).name} shows outputs from an earlier run, or code changed after it "
                    f"ran (cell {n}, starting {first_line!r}). {advice}")
    return None


#: Pressed by the export cell's output, once: the save button of the notebook that shows it
#: (JupyterLab and Notebook 7 run trusted JavaScript with ``element``, the output's node, which is
#: put on the page just after: the script waits for it). A copy of the output opened later does nothing.
_SAVE_SCRIPT = """
(function press(tries) {
  if (Date.now() > %(until_ms)d) { return; }
  var panel = element.isConnected && element.closest('.jp-NotebookPanel');
  var save = panel && panel.querySelector('[data-command="docmanager:save"]');
  if (save) { save.click(); } else if (tries > 0) { setTimeout(function () { press(tries - 1); }, 100); }
})(50);
"""
#: How long the export waits for JupyterLab's save to reach the file.
SAVE_WAIT_SECONDS = 10.0


def save_from_the_browser(nb_path: str | Path, wait: float = SAVE_WAIT_SECONDS) -> bool | None:
    """Ask the notebook's JupyterLab to save it now, so that the file holds every edit (a written
    answer changed after the last save included); True once the file changed, False if it did not
    within ``wait`` seconds, None where no Jupyter server runs the kernel (nothing to ask)."""
    import os
    import time

    if not os.environ.get("JPY_SESSION_NAME") or _this_kernel() is None:  # set by jupyter_server for its kernels
        return None
    from IPython.display import Javascript, display

    path = Path(nb_path)
    before = path.stat().st_mtime_ns if path.exists() else None
    display(Javascript(_SAVE_SCRIPT % {"until_ms": int((time.time() + wait) * 1000)}))
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if path.exists() and path.stat().st_mtime_ns != before:
            time.sleep(0.2)  # the contents API writes the file once; let it finish
            return True
    return False


def latex_available() -> bool:
    """True when the PDF can be made (xelatex and pandoc on the PATH)."""
    from .core.pdf import latex_missing

    return latex_missing() is None


def export_submission(grader, notebook: str | None = None) -> Path | None:
    """Save the submission zip next to the notebook, with a PDF of the written answers and the
    plots they discuss inside when LaTeX is present (:mod:`helpers.pdf`, as the TAs' PDFs).

    Unlike a bare ``grader.export()``, it saves the notebook first where JupyterLab shows it
    (:func:`save_from_the_browser`), refuses a saved file that does not show this kernel's run (see
    :func:`unsaved_run`), and never leaves a broken zip behind when the PDF cannot be made: the
    zip keeps the notebook without the PDF, and it says so. In otter's grading mode it does
    nothing, as ``grader.export`` does.

    Parameters
    ----------
    grader : otter.Notebook
        The notebook's ``grader`` object.
    notebook : str, optional
        The notebook file; defaults to the one the grader was made for.

    Returns
    -------
    pathlib.Path
        The zip to upload.

    Raises
    ------
    NotebookNotSaved
        The file on disk would upload stale or missing outputs; the message says what to do.
    """
    if getattr(type(grader), "_grading_mode", False):
        return None
    nb_path = notebook or getattr(grader, "_notebook", None)
    if not nb_path:
        raise ValueError("pass notebook='<name>.ipynb': the grader does not know its notebook")
    saved = save_from_the_browser(nb_path)
    problem = unsaved_run(nb_path, just_saved=bool(saved))
    if problem:
        raise NotebookNotSaved(problem)
    if saved is False:
        print("Could not save the notebook from here (is its toolbar hidden, or is it open in another editor?): "
              "the zip holds it as you last saved it. If you changed anything since, save and run this cell again.")
    zip_path = Path(nb_path).with_name(Path(nb_path).stem + "_submission.zip")
    grader.export(nb_path, export_path=str(zip_path), pdf=False)
    compress_zip(zip_path)
    if latex_available():
        add_pdf(zip_path, Path(nb_path))
    else:
        print("LaTeX (xelatex + pandoc) not found: the zip holds the notebook without a PDF.")
    print(f"Upload this file: {zip_path}")
    return zip_path


def compress_zip(zip_path: Path) -> None:
    """Rewrite the zip with every entry deflated: otter stores them as they are, and a notebook's
    outputs (bertviz's views embed their scripts) shrink several times. Same entries, same bytes."""
    import os
    import zipfile

    zip_path = Path(zip_path)
    tmp = zip_path.with_name(zip_path.name + ".tmp")
    with zipfile.ZipFile(zip_path) as src, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            entry = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            entry.external_attr, entry.compress_type = info.external_attr, zipfile.ZIP_DEFLATED
            out.writestr(entry, src.read(info.filename))
    os.replace(tmp, zip_path)


def add_pdf(zip_path: Path, nb_path: Path) -> None:
    """Put the PDF of the notebook's written answers and plots into the zip, the same PDF a TA's
    ``course pdf`` makes; a failure leaves the zip as it was (valid, without the PDF) and says so."""
    import tempfile
    import zipfile

    from .core.pdf import render_pdf

    import nbformat

    with tempfile.TemporaryDirectory(prefix="export-pdf-") as tmp:
        pdf = Path(tmp) / f"{nb_path.stem}.pdf"
        try:
            rendered = render_pdf(nbformat.read(nb_path, as_version=4), pdf, title=nb_path.name,
                                  lines=["The written answers and the plots they discuss"])
        except Exception as err:  # a LaTeX failure must not cost the student a valid zip
            print(f"Could not make the PDF ({type(err).__name__}: {err}); the zip holds the notebook without it.")
            return
        with zipfile.ZipFile(zip_path, "a", compression=zipfile.ZIP_DEFLATED) as zf:
            if pdf.name not in zf.namelist():
                zf.write(pdf, arcname=pdf.name)
    if rendered.verbatim:
        print("Your answers to " + ", ".join(rendered.verbatim) + " are in the PDF as plain text: LaTeX could not "
              "typeset their math (check it renders in the notebook).")
