"""mathruler's ``grade_answer`` under a hard time limit: the r1v reward's symbolic check.

mathruler hands answers to sympy, which evaluates what it parses: the ten characters ``9**9**9**9`` are a power
tower whose value no machine can hold, and the grading never returns (a reward that hangs stalls a whole verl
step). No check of the text can foresee every such input (factorials, towers, nested roots), and a thread stuck in
a C-level integer power cannot be interrupted, so the grading runs in a worker process that is killed when it
overruns: the answer is then graded incorrect and the caller counts a timeout.

Each caller takes an idle worker or starts one (``python -c`` with mathruler only: no chartrl import, no
``__main__`` re-import, safe under Ray and threads); a killed worker is replaced on the next call. Workers end
with the process (their stdin closes).
"""

from __future__ import annotations

import atexit
import json
import select
import subprocess
import sys
import threading
from dataclasses import dataclass

START_TIMEOUT_S = 120.0
"""Seconds a worker may take to import mathruler (and sympy); a worker that cannot start is an infrastructure
failure and raises."""

GRADE_TIMEOUT_S = 3.0
"""Seconds one ``grade_answer`` call may take before its worker is killed. mathruler grades an ordinary answer
in milliseconds; sympy's ``simplify`` on a short expression takes well under a second."""

MAX_GRADED_CHARS = 1000
"""Answers (and truths) longer than this are graded incorrect without calling mathruler: GeoQA answers are a few
characters, and mathruler's normalisation regexes are not linear in the length."""

MAX_POWERS = 1
"""Answers with more power operators (``**`` or ``^``) than this are graded incorrect without calling mathruler: a
chained power is the commonest way to ask sympy for an unbounded number, and refusing it up front spares the
worker a kill and a restart. (mathruler refuses ``^`` followed by two digits itself.)"""

_WORKER_SOURCE = """
import json, sys
from mathruler.grader import grade_answer
sys.stdout.write("ready\\n")
sys.stdout.flush()
for line in sys.stdin:
    answer, truth = json.loads(line)
    try:
        result = bool(grade_answer(answer, truth))
    except Exception as err:  # mathruler's own bugs are a wrong grade, not a crash of the reward
        result = False
    sys.stdout.write(json.dumps(result) + "\\n")
    sys.stdout.flush()
"""


@dataclass(frozen=True)
class Grade:
    correct: bool
    timed_out: bool


class _Worker:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER_SOURCE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",  # the lines are JSON written with ensure_ascii: a lone surrogate travels escaped
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], START_TIMEOUT_S)
        if not ready or self.process.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError(
                f"the mathruler grading worker did not start within {START_TIMEOUT_S:.0f} s; check that "
                f"{sys.executable} can import mathruler"
            )

    def grade(self, answer: str, truth: str, timeout_s: float) -> bool | None:
        """The grade, or None when the worker overran ``timeout_s`` (it is then killed)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([answer, truth]) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not ready:
            self.close()
            return None
        line = self.process.stdout.readline()
        if not line:  # the worker died (out of memory, killed from outside): no grade
            self.close()
            return None
        return bool(json.loads(line))

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


_idle: list[_Worker] = []
_lock = threading.Lock()


def grade_answer_within(answer: str, truth: str, timeout_s: float = GRADE_TIMEOUT_S) -> Grade:
    """mathruler's ``grade_answer(answer, truth)``, killed after ``timeout_s`` seconds (graded incorrect, with
    ``timed_out`` set). Identical strings are correct without a worker; over-long ones and chained powers are
    incorrect without one."""
    if answer.strip() == truth.strip():
        return Grade(correct=True, timed_out=False)
    if len(answer) > MAX_GRADED_CHARS or len(truth) > MAX_GRADED_CHARS:
        return Grade(correct=False, timed_out=False)
    if answer.count("**") + answer.count("^") > MAX_POWERS:
        return Grade(correct=False, timed_out=False)
    with _lock:
        worker = _idle.pop() if _idle else None
    if worker is None or not worker.alive:
        worker = _Worker()
    result = worker.grade(answer, truth, timeout_s)
    if result is None:
        return Grade(correct=False, timed_out=True)
    with _lock:
        _idle.append(worker)
    return Grade(correct=result, timed_out=False)


@atexit.register
def _close_workers() -> None:
    with _lock:
        workers, _idle[:] = list(_idle), []
    for worker in workers:
        worker.close()
