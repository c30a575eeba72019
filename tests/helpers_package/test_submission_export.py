"""export_submission refuses to zip a notebook file that does not show the kernel's run.

A real kernel runs a small notebook; between cells the test writes different versions of the
file to disk, as a student's save (or its absence) would, and asks the kernel what it thinks of
each. The probes run with store_history=False so that they leave the kernel's history alone.
"""

import copy

import nbformat
import pytest
from nbclient import NotebookClient

from helpers.submission import NotebookNotSaved, export_submission, unsaved_run

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)


def probe(client, nb, path) -> str:
    cell = nbformat.v4.new_code_cell(
        f"from helpers.submission import unsaved_run\nprint(repr(unsaved_run({str(path)!r})))")
    # nbclient puts the probe in the notebook at this index; the test saves its own copy
    client.execute_cell(cell, len(nb.cells) - 1, store_history=False)
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout").strip()


def test_the_export_check_compares_the_saved_file_with_the_kernels_history(tmp_path):
    path = tmp_path / "homework.ipynb"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("%time y = x + 1"),  # a magic: compared as IPython transforms it
        nbformat.v4.new_code_cell("   "),
        nbformat.v4.new_markdown_cell("## Submit"),
        nbformat.v4.new_code_cell("export_submission(grader)"),
    ])
    nbformat.write(nb, path)  # the file as first opened: no outputs
    client = NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    with client.setup_kernel():
        for index in (0, 1):
            client.execute_cell(nb.cells[index], index)
        executed = copy.deepcopy(nb)  # what the browser shows (the probes below reuse a cell slot)

        # Restart & Run All reaches the export before any save: the file has no outputs
        assert "saved without outputs" in probe(client, nb, path)
        assert "Save the notebook now" in probe(client, nb, path)

        nbformat.write(executed, path)  # the student saves: the file shows this run
        assert probe(client, nb, path) == "None"

        stale = nbformat.read(path, as_version=4)
        stale.cells[1].source = "%time y = x + 2"  # edited after it ran, saved without running it
        nbformat.write(stale, path)
        message = probe(client, nb, path)
        assert "code changed after it ran" in message and "cell 2" in message and "%time y = x + 2" in message

        earlier = nbformat.read(path, as_version=4)
        earlier.cells[0].execution_count = 7  # outputs of an earlier kernel: counts this one never reached
        nbformat.write(earlier, path)
        assert "cell 1" in probe(client, nb, path)

        partial = nbformat.read(path, as_version=4)
        partial.cells[0].execution_count = 1
        partial.cells[1].execution_count = None  # an autosave in the middle of Run All
        nbformat.write(partial, path)
        assert "cell 2 of the saved homework.ipynb has not run" in probe(client, nb, path)


def test_the_export_raises_with_the_message_and_stays_quiet_where_it_cannot_judge(tmp_path, monkeypatch):
    path = tmp_path / "homework.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)

    class FakeShell:
        user_ns = {"_ih": [""]}

        @staticmethod
        def transform_cell(source):
            return source

    assert "saved without outputs" in unsaved_run(path, shell=FakeShell())
    assert unsaved_run(path) is None  # no IPython here: nothing to compare with

    class Grader:
        _grading_mode = False
        _notebook = str(path)

        def export(self, *args, **kwargs):
            raise AssertionError("a stale file must never reach otter's export")

    monkeypatch.setattr("helpers.submission._this_kernel", lambda: FakeShell())
    with pytest.raises(NotebookNotSaved, match="then run this cell again"):
        export_submission(Grader())

    class GradingModeGrader(Grader):
        _grading_mode = True  # otter re-running the notebook to grade it: export is a no-op

    assert export_submission(GradingModeGrader()) is None


def test_the_export_zip_is_compressed_with_the_same_entries(tmp_path):
    import zipfile

    from helpers.submission import compress_zip

    notebook = ("<script>" + "var d3 = function () { return 1; };\n" * 20000 + "</script>").encode()
    path = tmp_path / "homework_submission.zip"
    with zipfile.ZipFile(path, "w") as zf:  # stored, as otter writes it
        zf.writestr("homework.ipynb", notebook)
        zf.writestr("data/points.csv", b"x,y\n1,2\n")
    before = path.stat().st_size
    compress_zip(path)
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == ["homework.ipynb", "data/points.csv"]
        assert zf.read("homework.ipynb") == notebook and zf.read("data/points.csv") == b"x,y\n1,2\n"
        assert {info.compress_type for info in zf.infolist()} == {zipfile.ZIP_DEFLATED}
    assert path.stat().st_size < before / 10

