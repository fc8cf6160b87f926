"""verl's metric names, kept, and the ones the report reads added under the local trainer's names."""

from __future__ import annotations

import pytest

from chartrl.verl_backend.metrics import with_aliases


@pytest.mark.parametrize(
    "logged, added",
    [
        ({"critic/score/mean": 0.4}, {"reward/overall": 0.4}),
        # MLflow keys carry '@' as '_at_' (verl's logger sanitises them); the largest N wins
        ({"val-aux/chartqa_human/accuracy/mean_at_1": 0.2, "val-aux/chartqa_human/accuracy/mean_at_4": 0.3},
         {"val/accuracy": 0.3}),
        # several data sources: their mean
        ({"val-aux/chartqa_human/accuracy/mean@1": 0.2, "val-core/chartqa_augmented/accuracy/mean@1": 0.6},
         {"val/accuracy": 0.4}),
        ({"val-core/x/reward/mean@1": 0.9, "actor/pg_loss": 0.1}, {}),  # reward is not accuracy
    ],
)  # fmt: skip
def test_aliases(logged, added):
    out = with_aliases(logged)
    assert {k: v for k, v in out.items() if k not in logged} == pytest.approx(added)
    assert {k: out[k] for k in logged} == logged
