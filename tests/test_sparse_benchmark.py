"""The sparse-reward suite's measures (``experiments/sparse_benchmark.py``) by hand, and its suite file."""
import numpy as np

from experiments import sparse_benchmark as sb


def test_windowed_success_rate_weights_updates_by_their_episodes(monkeypatch):
    monkeypatch.setattr(sb, "WINDOW", 2)
    monkeypatch.setattr(sb, "MIN_EPISODES", 1)
    steps, rate = sb.success_curve({"global_step": [1, 2, 3, 4], "rollout/episodes": [0, 2, 2, 4],
                                    "rollout/success_rate": [float("nan"), 0.5, 1.0, 1.0]})
    # windows of 2 updates: (0 + 1) / 2, (1 + 2) / (2 + 2), (2 + 4) / (2 + 4); nothing finished in the first update
    assert np.isnan(rate[0]) and rate[1:].tolist() == [0.5, 0.75, 1.0]


def test_a_lucky_first_episode_is_not_a_success_rate(monkeypatch):
    """Seen in a real run: one random-policy episode reached the goal in the first update (1 of 1); the rate counts
    only once the window is full and holds MIN_EPISODES episodes."""
    monkeypatch.setattr(sb, "WINDOW", 3)
    monkeypatch.setattr(sb, "MIN_EPISODES", 10)
    steps, rate = sb.success_curve({"global_step": [1, 2, 3, 4, 5], "rollout/episodes": [1, 8, 8, 1, 8],
                                    "rollout/success_rate": [1.0, 0.125, 0.25, 1.0, 1.0]})
    # window not yet full at 1 and 2; then (1 + 1 + 2) / 17, (1 + 2 + 1) / 17, (2 + 1 + 8) / 17
    assert np.isnan(rate[:2]).all() and np.allclose(rate[2:], [4 / 17, 4 / 17, 11 / 17])


def test_median_ratio_and_its_bootstrap_interval():
    ratio, lo, hi = sb.median_ratio_ci(np.array([10.0, 20, 30]), np.array([40.0, 40, 40]))
    assert ratio == 0.5 and 0.25 <= lo <= 0.5 <= hi <= 0.75
    assert sb.median_ratio_ci(np.array([5.0, 5]), np.array([5.0, 5]))[1:] == (1.0, 1.0)


def test_every_suite_variant_has_its_recipe_and_every_task_a_budget():
    suite = sb.load_suite()
    assert all((sb.RECIPES / f"{recipe}.yaml").is_file() for recipe in suite["variants"].values())
    assert all(t.startswith("MiniGrid-") and spec["steps"] > 0 for t, spec in suite["tasks"].items())
