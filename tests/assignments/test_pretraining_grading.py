"""The pretraining assignment's own checks: the student's run passes every public check and reaches
the end of the experiment. Its build and grading batch are checked in ``test_assignment_batches``;
the corpus, batches, model and training loop in ``test_pretraining_helpers``."""

import re

from tests.support.adversarial import grade_forgeries
from tests.support.batches import LIMITS
from tests.pretraining_variants import FORGEABLE_PROPERTIES
from tests.support.student_run import printed

SLUG = "pretraining"


def test_student_run_passes_every_public_check_and_reports_every_model(assignment_batch):
    folder = assignment_batch(SLUG).folder
    said = printed(folder.parent / "student_without_latex" / f"{SLUG}.ipynb")
    assert said.count("All test cases passed!") == 5, said
    # the baseline does not depend on training, so its figure is the same in the fast setting
    assert re.search(r"most common place: London, exact match on held-out people \d+\.\d%", said), said
    for model in ("no pretraining", "pretraining + finetuning", "synthesizer: pretraining + finetuning"):
        assert re.search(rf"{re.escape(model)}: +\d+ of \d+ held-out people \(\d+\.\d%\)", said), (model, said)
    assert re.search(r"\d+ right, \d+ wrong; wrong answers that are not a place of the corpus: \d+", said), said


def test_forgeries_pass_only_what_trivial_functions_pass(layout, assignment_batch, tmp_path):
    """Issue 35: a notebook that implements nothing and makes every number computed in its kernel lie
    passes no hidden test (it passed 3.5 of 12 points before the property checks were judged from raw
    values); one that also sends what each property accepts passes only the generator test, as any function that
    draws its examples, even meaningless ones, from the generator does."""
    passed = grade_forgeries(layout, SLUG, assignment_batch(SLUG).folder / "samples" / "blank.ipynb", tmp_path, LIMITS)
    assert passed == {"every_number": set(), "collected_values": FORGEABLE_PROPERTIES}
