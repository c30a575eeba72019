"""The pretraining assignment's own checks: the student's run passes every public check and reaches
the end of the experiment. Its build and grading batch are checked in ``test_assignment_batches``;
the corpus, batches, model and training loop in ``test_pretraining_helpers``."""

import re

from student_run import printed

SLUG = "pretraining"


def test_student_run_passes_every_public_check_and_reports_every_model(assignment_batch):
    folder = assignment_batch(SLUG).folder
    said = printed(folder.parent / "student_without_latex" / f"{SLUG}.ipynb")
    assert said.count("All test cases passed!") == 5, said
    # the baseline does not depend on training, so its figure is the same in the fast setting
    assert re.search(r"most common place: London, exact match on held-out people \d+\.\d%", said), said
    for model in ("no pretraining", "pretraining + finetuning", "synthesizer: pretraining + finetuning"):
        assert re.search(rf"{re.escape(model)}: +\d+\.\d%", said), (model, said)
    assert re.search(r"\d+ right, \d+ wrong; wrong answers that are not a place of the corpus: \d+", said), said
