"""``course new SLUG``: a new assignment that builds and grades at once, to grow from.

It writes the three files every assignment brings (docs/instructors/writing-an-assignment.md says why):

- ``solutions/<slug>/<slug>.ipynb``: a minimal master in the course's format: the configuration, an
  introduction, a setup cell, one code question (a prompt, a reference solution, a public check worth
  0 points and a hidden test that checks through ``expect``), one written question with its points and
  a reference answer, and the export cell;
- ``helpers/<slug>.py``: the assignment's helpers (data, plots, harnesses: never a solution);
- ``tests/<slug>_variants.py``: a known-wrong implementation that must lose points and a correct
  alternative that must keep them.

Nothing that exists is overwritten. ``course build SLUG`` and ``course grade`` work on the result as
it is; then replace the example question with the assignment's own.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from autograder.layout import CourseError, Layout

SLUG = re.compile(r"[a-z][a-z0-9_]{1,40}")


def _raw(text: str):
    return nbformat.v4.new_raw_cell(text)


def master_notebook(slug: str) -> nbformat.NotebookNode:
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    nb.cells = [
        _raw(f"# ASSIGNMENT CONFIG\nname: {slug}\nexport_cell: false\ncheck_all_cell: false\nrun_tests: false\n"
             "generate: true\ntests:\n  files: false\n  ok_format: false\nautograder_files:\n  - golden_values.json\n"
             "  - helpers\n"),
        md(f"# {slug.replace('_', ' ').capitalize()}\n\nWhat this assignment builds, and why. Each part says what "
           "is built and why, then has a TODO cell, then a check you can run.\n\n"
           "**Inputs stay as they are.** A graded function returns new tensors and changes none of the tensors it "
           "is given (no `x += ...`, `x[...] = ...` or `x.add_(...)` on an argument) unless its own text says "
           "otherwise; a hidden test checks this for every graded function that takes a tensor."),
        md("## Setup"),
        code("import torch\n\n"
             f"from helpers import export_submission, seed_everything, use_setting\n"
             f"from helpers.{slug} import example_scores\n\n"
             'use_setting("full")\nseed_everything(0)'),
        md("## Part 1. Softmax over the rows"),
        _raw("# BEGIN QUESTION\nname: q1_softmax_rows"),
        md("**Question 1 (code).** Implement `softmax_rows(x)`: for a tensor `x` of shape `(..., N)`, return the "
           "softmax of each row, $\\exp(x_i) / \\sum_j \\exp(x_j)$ over the last dimension, with the shape of "
           "`x`. Subtract each row's maximum first, so that large scores do not overflow. Leave `x` unchanged."),
        _raw("# BEGIN SOLUTION"),
        code('def softmax_rows(x):\n    """Softmax over the last dimension; (..., N) -> (..., N)."""\n'
             "    # TODO: subtract each row's maximum, exponentiate, divide by the row's sum\n"
             "    # BEGIN SOLUTION\n    z = torch.exp(x - x.max(dim=-1, keepdim=True).values)\n"
             "    return z / z.sum(dim=-1, keepdim=True)\n    # END SOLUTION\n"),
        _raw("# END SOLUTION"),
        _raw("# BEGIN TESTS"),
        code('""" # BEGIN TEST CONFIG\npoints: 0\nhidden: false\n""" # END TEST CONFIG\n'
             "def test_softmax_rows_public(softmax_rows):\n    import torch\n"
             "    x = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 1000.0]])\n    before = x.clone()\n"
             "    y = softmax_rows(x)\n"
             '    assert torch.equal(x, before), "softmax_rows changed its argument in place"\n'
             '    assert y.shape == x.shape, f"expected shape {tuple(x.shape)}, got {tuple(y.shape)}"\n'
             '    assert torch.isfinite(y).all(), "large scores overflowed: subtract each row\'s maximum first"\n'
             '    assert torch.allclose(y.sum(-1), torch.ones(2)), "each row must sum to 1 (over the last dimension)"\n'),
        code('""" # BEGIN TEST CONFIG\npoints: 2\nhidden: true\n""" # END TEST CONFIG\n'
             "def test_softmax_rows_hidden(softmax_rows):\n    import torch\n"
             "    from helpers import expect, expect_arguments_unchanged\n"
             "    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(1))\n"
             '    expect("softmax_rows/random", softmax_rows(x), rtol=1e-5, atol=1e-6)\n'
             "    # the course's rule, stated in the introduction: a graded function leaves its arguments as they were\n"
             '    expect_arguments_unchanged("softmax_rows/arguments_changed_by_the_call", softmax_rows, x)\n'),
        _raw("# END TESTS"),
        _raw("# END QUESTION"),
        code("print(softmax_rows(example_scores()))"),
        _raw("# BEGIN QUESTION\nname: q2_why_the_maximum\nmanual: true\npoints: 1"),
        md("**Question 2 (written).** Why does subtracting each row's maximum leave the softmax unchanged?"),
        _raw("# BEGIN SOLUTION"),
        md("**Reference answer.** The factor $e^{-m}$ appears in every numerator and in the sum, so it cancels; "
           "the largest exponent is then $e^0 = 1$, so nothing overflows."),
        _raw("# END SOLUTION"),
        _raw("# END QUESTION"),
        md("## Submit\n\n1. Kernel → Restart Kernel and Run All Cells.\n2. The cell below saves the notebook "
           "and writes the zip: upload it."),
        code("export_submission(grader)"),
    ]
    return nb


def helpers_module(slug: str) -> str:
    return (f'"""Helpers of the {slug} assignment: data, plots and harnesses the students should not have to\n'
            'write. Never a solution (`course check` looks for every line of the master\'s solutions here)."""\n\n'
            "from __future__ import annotations\n\nimport torch\n\n__all__ = [\"example_scores\"]\n\n\n"
            "def example_scores() -> torch.Tensor:\n"
            '    """A small batch of scores to try a softmax on, shape (2, 4)."""\n'
            "    return torch.tensor([[0.5, 1.0, -1.0, 2.0], [3.0, 3.0, 3.0, 3.0]])\n")


def variants_module(slug: str) -> str:
    return (f'"""Known-wrong and known-correct implementations of {slug}\'s graded functions: each wrong one\n'
            "names the hidden tests it must fail and the public check that must catch it; each correct one must\n"
            'keep full marks."""\n\n'
            "WRONG = [\n    {\n        \"name\": \"softmax_over_the_first_dimension\",\n"
            "        \"function\": \"softmax_rows\",\n        \"source\": '''\n"
            "def softmax_rows(x):\n    z = torch.exp(x - x.max(dim=0, keepdim=True).values)\n"
            "    return z / z.sum(dim=0, keepdim=True)  # BUG: over the first dimension\n''',\n"
            "        \"must_lose\": [\"test_softmax_rows_hidden\"],\n"
            "        \"must_fail_public\": [\"test_softmax_rows_public\"],\n    },\n]\n\n"
            "CORRECT = [\n    {\n        \"name\": \"softmax_rows_by_torch\",\n"
            "        \"function\": \"softmax_rows\",\n        \"source\": '''\n"
            "def softmax_rows(x):\n    return torch.softmax(x.double(), dim=-1).to(x.dtype)\n''',\n    },\n]\n")


def new_assignment(layout: Layout, slug: str) -> list[Path]:
    """Write the three files of a new assignment; returns them. Refuses a bad name or an existing one."""
    if not SLUG.fullmatch(slug):
        raise CourseError(f"{slug!r} is not an assignment name: lowercase letters, digits and _, starting with a letter")
    targets = {layout.solutions / slug / f"{slug}.ipynb": None, layout.helpers / f"{slug}.py": helpers_module(slug),
               layout.root / "tests" / f"{slug}_variants.py": variants_module(slug)}
    existing = [p for p in targets if p.exists()] + ([layout.helpers / slug] if (layout.helpers / slug).exists() else [])
    if existing:
        raise CourseError(f"{slug} exists already: {', '.join(str(p) for p in existing)}")
    written = []
    for path, text in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            nbformat.write(master_notebook(slug), path)
        else:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


__all__ = ["new_assignment", "master_notebook"]
