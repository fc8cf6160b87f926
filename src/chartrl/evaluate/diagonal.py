"""The diagonal check: the same generations scored by two independent scorers (rule vs judge or panel). If a
policy learned to please one scorer, its accuracies drift apart and the scorers stop agreeing.

Reported: each scorer's accuracy, the drift |a - b|, raw agreement, Cohen's kappa (agreement corrected for
chance, Cohen 1960) with a percentile bootstrap interval over questions, and every disagreeing item with both
verdicts. Items either scorer could not judge (judge failures) are left out and counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chartrl.evaluate.intervals import bootstrap_paired


def cohens_kappa(a: Sequence[int], b: Sequence[int]) -> float | None:
    """Kappa of two binary raters over the same items; None when undefined (no items, or chance agreement 1)."""
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    if expected == 1.0:
        return None
    return (observed - expected) / (1 - expected)


def diagonal(
    first: Mapping[str, Any], second: Mapping[str, Any], *, samples: int, confidence: float, seed: int
) -> dict[str, Any]:
    """Compare two scorer outputs over the same generations (matched by item id)."""
    by_id = {item["id"]: item for item in second["items"]}
    pairs, skipped = [], 0
    for item in first["items"]:
        other = by_id.get(item["id"])
        if other is None:
            raise ValueError(
                f"item {item['id']} is scored by {first['aggregate']['scorer']} but not by the other scorer"
            )
        if item["accuracy"] is None or other["accuracy"] is None:
            skipped += 1
            continue
        pairs.append((item, other))
    a = [int(x["accuracy"] >= 0.5) for x, _ in pairs]
    b = [int(y["accuracy"] >= 0.5) for _, y in pairs]
    names = (first["aggregate"]["scorer"], second["aggregate"]["scorer"])
    acc_a = sum(a) / len(a) if a else None
    acc_b = sum(b) / len(b) if b else None
    interval = bootstrap_paired(a, b, cohens_kappa, samples=samples, confidence=confidence, seed=seed)
    return {
        "scorers": list(names),
        "n": len(pairs),
        "left_out_judge_failures": skipped,
        "accuracy": {names[0]: acc_a, names[1]: acc_b},
        "drift": abs(acc_a - acc_b) if a else None,
        "agreement": sum(x == y for x, y in zip(a, b, strict=True)) / len(a) if a else None,
        "kappa": cohens_kappa(a, b),
        "kappa_interval": list(interval) if interval else None,
        "confidence": confidence,
        "bootstrap_samples": samples,
        "judge": second["aggregate"].get("judge") or first["aggregate"].get("judge"),
        "disagreements": [
            {
                "id": x["id"],
                "answer": x["answer"],
                names[0]: x["verdict"],
                names[1]: y["verdict"],
                "detail": y.get("judge_detail") or x.get("judge_detail"),
            }
            for (x, y), va, vb in zip(pairs, a, b, strict=True)
            if va != vb
        ],
    }
