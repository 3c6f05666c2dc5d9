"""Reported spreads are sample standard deviations (ddof=1), issue 46: hand numbers for the helpers every report
uses, and a MuJoCo report cell built from committed-style rows."""
import math

import pytest

from core.run.evaluation import mean_std, sample_std
from experiments.stats import mean_pm_std


def test_sample_std_hand_numbers():
    """(1, 2, 3, 4): mean 2.5, squared deviations sum 5, so ddof=1 gives sqrt(5/3) = 1.2910 (ddof=0: sqrt(5/4));
    one value has no spread (NaN), as numpy's ddof=1 but without its warning."""
    assert sample_std([1, 2, 3, 4]) == pytest.approx(math.sqrt(5 / 3))
    assert mean_std([1.0, 2.0, 3.0, 4.0]) == pytest.approx((2.5, math.sqrt(5 / 3)))
    assert math.isnan(sample_std([7.0])) and math.isnan(sample_std([]))


def test_mean_pm_std_formats_and_drops_a_missing_spread():
    assert mean_pm_std([1, 2, 3, 4], 2) == "2.50 +- 1.29"
    assert mean_pm_std([1000, 1200]) == "1100 +- 141"  # sqrt(2) * 100; ddof=0 would print 100
    assert mean_pm_std([5.0]) == "5"


def test_mujoco_report_cells_are_sample_stds(tmp_path):
    from experiments.mujoco_report import write_report
    from experiments.result_rows import write_rows

    rows = [{"env": "Hopper-v5", "variant": v, "seed": s, "total_steps": 1000, "final_return_mean": r,
             "eval_return_mean": r, "wall_time_s": 1.0, "sps": 1.0, "cpu": ""}
            for v, rs in (("a", (1000.0, 1200.0)), ("b", (900.0,))) for s, r in enumerate(rs, start=1)]
    write_rows(tmp_path / "results.csv", rows)
    write_report(tmp_path, tmp_path / "no-runs", ["Hopper-v5"], ["a", "b"], [1, 2], 1000, "test")
    md = (tmp_path / "results.md").read_text()
    assert "| 1100 +- 141 (2);" in md and "| 900 (1);" in md and "sample std (ddof=1)" in md
