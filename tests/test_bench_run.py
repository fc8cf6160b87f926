"""bench/run.py --only: the sections measured replace those of the same heading; the rest of bench/results.md stays."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

from run import merged  # noqa: E402


def test_only_the_measured_sections_are_replaced_and_a_new_one_is_added():
    existing = "# benchmarks\n\nopening\n\n## A\n\na1\n\n### A's part\n\na2\n\n## B\n\nb1\n"
    measured = "# benchmarks\n\nanother opening\n\n## B\n\nb2\n\n## C\n\nc"
    assert merged(existing, measured) == (
        "# benchmarks\n\nopening\n\n## A\n\na1\n\n### A's part\n\na2\n\n## B\n\nb2\n\n## C\n\nc\n"
    )
    assert merged(existing, "# benchmarks\n") == existing  # nothing measured: nothing changes
    # a new section after an unchanged last one: a blank line between them
    assert merged(existing, "## C\n\nc\n").endswith("## B\n\nb1\n\n## C\n\nc\n")
