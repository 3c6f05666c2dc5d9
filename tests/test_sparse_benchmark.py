"""The sparse-reward suite's measures (``experiments/sparse_benchmark.py``) by hand, and its suite file."""
import numpy as np

from experiments import sparse_benchmark as sb


def test_windowed_success_rate_weights_updates_by_their_episodes(monkeypatch):
    monkeypatch.setattr(sb, "WINDOW", 2)
    steps, rate = sb.success_curve({"global_step": [1, 2, 3, 4], "rollout/episodes": [0, 2, 2, 4],
                                    "rollout/success_rate": [float("nan"), 0.5, 1.0, 1.0]})
    # windows of 2 updates: (0 + 1) / 2, (1 + 2) / (2 + 2), (2 + 4) / (2 + 4); nothing finished in the first update
    assert np.isnan(rate[0]) and rate[1:].tolist() == [0.5, 0.75, 1.0]


def test_median_ratio_and_its_bootstrap_interval():
    ratio, lo, hi = sb.median_ratio_ci(np.array([10.0, 20, 30]), np.array([40.0, 40, 40]))
    assert ratio == 0.5 and 0.25 <= lo <= 0.5 <= hi <= 0.75
    assert sb.median_ratio_ci(np.array([5.0, 5]), np.array([5.0, 5]))[1:] == (1.0, 1.0)


def test_every_suite_variant_has_its_recipe_and_every_task_a_budget():
    suite = sb.load_suite()
    assert all((sb.RECIPES / f"{recipe}.yaml").is_file() for recipe in suite["variants"].values())
    assert all(t.startswith("MiniGrid-") and spec["steps"] > 0 for t, spec in suite["tasks"].items())
