"""benchmarks/bench_verdicts.py, small: every scenario runs through the verdict code and the
goals hold (no wrong sign, false positives not above alpha, power for a 10% effect); the
figures in docs/verdicts.md come from its full run (--trials 400)."""

import subprocess
import sys

import pytest
from common import ROOT


@pytest.mark.timeout(300)
def test_the_verdict_benchmark_runs_every_scenario_and_meets_its_goals():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_verdicts.py"),
                          "--trials", "20"], capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "goals met"
    names = [ln.split()[0] for ln in lines[1:-1]]
    for want in ("tune-null-k8", "tune-carryover-interleaved", "tune-outliers-10", "study-10",
                 "explain-confounded", "explain-unreplicated", "explain-lmdd-time",
                 "compare-10"):
        assert want in names, out.stdout
    for ln in lines[1:-1]:  # scenario, trials, false+, its upper bound, wrong sign, power
        assert ln.split()[4] == "0.0%", ln
