"""Benchmark scripts run end to end on a tiny budget (slow marker) and resume instead of redoing work."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mujoco_benchmark_tiny_sweep_and_resume(tmp_path):
    cmd = [sys.executable, "experiments/mujoco_benchmark.py", "--envs", "HalfCheetah-v5", "--variants", "dapo",
           "sb3-ppo", "--seeds", "1", "--total-steps", "4096", "--jobs", "2", "--out", str(tmp_path / "out"),
           "--runs-dir", str(tmp_path / "runs")]
    first = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.count("done ") == 2, first.stdout
    table = (tmp_path / "out" / "results.md").read_text()
    assert "| HalfCheetah-v5 |" in table and "IQM" in table
    assert "| sb3-ppo |" in table and "P(> dapo)" in table  # the across-envs rows against the first variant
    assert (tmp_path / "out" / "curves_HalfCheetah-v5.png").exists()
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and again.stdout.count("skip ") == 2, again.stdout


def test_mujoco_report_aggregate_by_hand():
    """Baseline means 100 (env a) and 10 (env b): normalised scores 0.5 and 2 -> IQM 1.25; P(> base) 1/2."""
    from experiments.mujoco_report import _aggregate
    rows = [{"env": e, "variant": v, "final_return_mean": x}
            for e, v, x in [("a", "base", 100), ("b", "base", 10), ("a", "new", 50), ("b", "new", 20)]]
    md = "\n".join(_aggregate(rows, ["a", "b"], ["base", "new"]))
    assert "| base | 1.00 [1.00, 1.00] | - | 2 |" in md
    assert "| new | 1.25 [" in md and "| 0.50 | 2 |" in md


@pytest.mark.slow
def test_throughput_benchmark_tiny(tmp_path):
    cmd = [sys.executable, "experiments/bench_throughput.py", "--parts", "acd", "--total-steps", "4096",
           "--repeats", "1", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = (tmp_path / "results.md").read_text()
    assert "(a) Equal hyper-parameters" in report and "(d) DAPO's per-iteration overhead" in report
