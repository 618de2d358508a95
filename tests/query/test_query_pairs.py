"""benchmarks.query_pairs: two checkouts' stores built and asked the same questions in turn; a worker
that imports another checkout's code than the one it stands for is refused."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.query_pairs import sign_test
from tests.support.paths import PROJECT_ROOT

QUESTIONS = ("table lineage depth 20 (upstream)", "jobs list (25, offset<1000)", "Marquez /lineage depth 20 (hub-heavy)")


def _pairs(baseline: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchmarks.query_pairs", "--baseline", str(baseline), "--jobs", "600"]
    command += ["--db", "sqlite", "--samples", "4"]
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_both_sides_answer_every_question_of_the_same_checkout() -> None:
    run = _pairs(PROJECT_ROOT)
    assert run.returncode == 0, run.stderr
    for question in QUESTIONS:
        line = next(line for line in run.stdout.splitlines() if line.startswith(question))
        p50_base, p50_this, _, _, ratio, faster, p_value = line[len(question) :].split()
        assert float(p50_base) > 0 and float(p50_this) > 0 and float(ratio) > 0
        assert re.fullmatch(r"[0-4]/4", faster) and 0 < float(p_value) <= 1


def test_a_baseline_whose_worker_imports_another_checkouts_code_is_refused(tmp_path: Path) -> None:
    # The baseline links to this checkout's benchmarks and what they import, but has no store code of its own.
    for package in ("benchmarks", "demo", "tests"):
        (tmp_path / package).symlink_to(PROJECT_ROOT / package)
    run = _pairs(tmp_path)
    assert run.returncode != 0 and "not its checkout's module" in run.stderr


@pytest.mark.parametrize(("successes", "trials", "expected"), [(0, 10, 2 / 1024), (5, 10, 1.0), (16, 60, 0.000394)])
def test_sign_test(successes: int, trials: int, expected: float) -> None:
    assert sign_test(successes, trials) == pytest.approx(expected, rel=1e-3)
