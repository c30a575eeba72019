"""The sizes and budgets of the pretraining notebook's experiment: one :class:`Experiment` per setting
(``FULL``, ``QUICK``, ``GRADING``) and :func:`experiment`, the one of the setting in force."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime import budget

__all__ = ["Experiment", "experiment", "FULL", "QUICK", "GRADING", "FAST"]


@dataclass(frozen=True)
class Experiment:
    """The sizes and budgets of the notebook's experiment (Parts 6 and 7), in one place."""

    people: int = 160
    block_size: int = 48
    batch_size: int = 64
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4
    pretrain_steps: int = 1400
    pretrain_lr: float = 2e-3
    finetune_steps: int = 80
    finetune_lr: float = 2e-4
    eval_every: int = 10

    def model_size(self) -> dict:
        return {"n_embd": self.n_embd, "n_layer": self.n_layer, "n_head": self.n_head}


FULL = Experiment()
# the quick setting (a slow laptop, about 3 minutes of training in all): fewer people, so each one's
# biographies come round more often, and a smaller, wider-than-deep model. It still stores most
# birthplaces during pretraining and shows the same effects as the full setting, only noisier: its
# 30 held-out people make every accuracy a multiple of 3.3%.
QUICK = Experiment(people=60, batch_size=32, n_embd=96, n_layer=2, pretrain_steps=1200, pretrain_lr=3e-3,
                   finetune_steps=60, finetune_lr=2e-4, eval_every=5)
# the grading setting only has to run every cell: a tiny model, a few steps (it learns nothing)
GRADING = Experiment(batch_size=16, n_embd=32, n_layer=2, pretrain_steps=20, finetune_steps=10, eval_every=5)
FAST = GRADING  # the older name, for notebooks handed out before the quick setting existed


def experiment() -> Experiment:
    """The experiment of the setting in force (``helpers.runtime.setting()``): ``FULL``, ``QUICK`` or
    ``GRADING``. The corpus is made the same way in the three; only its size, the model and the
    budgets change."""
    return budget(full=FULL, quick=QUICK, grading=GRADING)
