"""Packing known-wrong variants into shared notebooks must never let one bug hide another."""

import nbformat
import pytest

from tests.support.notebook_edits import definitions, pack_wrong, reached

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

MASTER = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in [
    "import torch\n\ndef f(x):\n    return x + 1\n\ndef g(x):\n    return 2 * x",
    "def h(x):\n    return f(x) * 3",
    "table = h(torch.ones(2))  # a global a test reads",
    '""" # BEGIN TEST CONFIG\nhidden: true\n""" # END TEST CONFIG\ndef test_f(f):\n    assert f(1) == 2',
    "def test_g(g):\n    f = 5  # a local that shadows the global f\n    assert g(f) == 10",
    "def test_h(h):\n    assert h(1) == 6",
    "def test_table(table):\n    assert table.sum() == 12",
    "%matplotlib inline",
]])


def variant(name, function, must):
    return {"name": name, "function": function, "source": f"def {function}(x):\n    return x", "must_lose": must}


def test_a_test_reaches_what_its_fixtures_and_globals_use_not_its_own_locals():
    uses = definitions(cell.source for cell in MASTER.cells)
    assert reached({"test_h"}, uses) >= {"h", "f"} and "g" not in reached({"test_h"}, uses)
    assert reached({"test_table"}, uses) >= {"table", "h", "f"}
    assert "f" not in reached({"test_g"}, uses)


def test_variants_share_only_where_no_must_fail_test_reaches_another_edit():
    wrong = [variant("f_bug", "f", ["test_f"]), variant("h_bug", "h", ["test_h"]),
             variant("g_bug", "g", ["test_g"]), variant("table_bug", "h", ["test_table"])]
    pack_wrong(wrong, MASTER)
    notebook = {v["name"]: v.get("notebook", v["name"]) for v in wrong}
    assert notebook["f_bug"] == notebook["g_bug"]  # test_g never calls f, test_f never calls g
    assert notebook["h_bug"] != notebook["f_bug"]  # test_h reaches f through h: f's bug would hide h's
    assert notebook["table_bug"] not in (notebook["h_bug"], notebook["f_bug"])  # one h, and table uses f


def test_a_must_fail_test_missing_from_the_master_is_named():
    with pytest.raises(ValueError, match="test_nowhere"):
        pack_wrong([variant("bug", "f", ["test_nowhere"])], MASTER)
