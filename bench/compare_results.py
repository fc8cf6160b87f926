"""Compare two ``results/`` folders of the same DAG (e.g. before and after a refactoring, or two machines).

Every file but logs, benchmarks and the MLflow store (run ids and timings differ by nature) is compared by its bytes;
``report/metrics.json`` is compared leaf by leaf, NaN equal to NaN. Metric files (``*.jsonl``) that differ are
compared record by record, and the keys that differ are listed, so that timings are told apart from results.

    python bench/compare_results.py before/results after/results
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SKIPPED = ("logs/", "benchmarks/", "mlflow", "mlartifacts", "mlruns", ".snakemake")


def _files(root: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(root)): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(s in str(p.relative_to(root)) for s in SKIPPED)
    }


def _digest(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def _leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{prefix}[{i}]")
    else:
        yield prefix, value


def _same(a: Any, b: Any) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return both_nan or a == b


def _jsonl_keys(a: Path, b: Path) -> set[str]:
    """Keys whose values differ between two metric files, record by record."""
    first = [json.loads(line) for line in a.read_text().splitlines() if line.strip()]
    second = [json.loads(line) for line in b.read_text().splitlines() if line.strip()]
    if len(first) != len(second):
        return {f"<{len(first)} records vs {len(second)}>"}
    keys: set[str] = set()
    for x, y in zip(first, second, strict=True):
        keys |= {k for k in set(x) | set(y) if not _same(x.get(k), y.get(k))}
    return keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = _files(args.before), _files(args.after)
    for name, only in (("only before", set(before) - set(after)), ("only after", set(after) - set(before))):
        if only:
            print(f"{name}: {', '.join(sorted(only))}")
    shared = sorted(set(before) & set(after))
    differing = [name for name in shared if _digest(before[name]) != _digest(after[name])]
    print(f"files compared {len(shared)}: identical {len(shared) - len(differing)}, differing {len(differing)}")
    for name in differing:
        detail = ""
        if name.endswith(".jsonl"):
            detail = f"  keys: {', '.join(sorted(_jsonl_keys(before[name], after[name])))}"
        print(f"  differs: {name}{detail}")
    metrics = "report/metrics.json"
    if metrics in before and metrics in after:
        a = dict(_leaves(json.loads(before[metrics].read_text())))
        b = dict(_leaves(json.loads(after[metrics].read_text())))
        keys = sorted(set(a) | set(b))
        changed = [k for k in keys if not _same(a.get(k, "<absent>"), b.get(k, "<absent>"))]
        print(f"{metrics}: {len(keys)} leaves, {len(changed)} differ")
        for key in changed:
            print(f"  {key}: {a.get(key, '<absent>')!r} -> {b.get(key, '<absent>')!r}")


if __name__ == "__main__":
    main()
