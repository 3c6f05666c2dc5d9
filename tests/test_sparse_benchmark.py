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


def test_a_report_of_one_task_keeps_the_other_tasks_curves_and_reference(tmp_path):
    """Running stage 2 task by task: the committed rows of DoorKey-5x5 stay in the table with RL Zoo's return, and
    its committed curves image is not redrawn from run directories that are not on this machine."""
    import json

    from experiments.result_rows import write_rows
    from experiments.sparse_benchmark import write_report

    out, runs = tmp_path / "out", tmp_path / "runs"
    out.mkdir()
    write_rows(out / "results.csv", [{"env": "MiniGrid-DoorKey-5x5-v0", "algo": "ppo", "recipe": "ppo", "seed": 1,
                                      "total_steps": 100352, "final_return": 0.96, "success_rate": 1.0,
                                      "steps_to_90": 18432, "eval_return": 0.96, "sps": 400.0, "cpu": "x"}])
    (out / "curves_MiniGrid-DoorKey-5x5-v0.png").write_bytes(b"committed")
    run = runs / "MiniGrid-KeyCorridorS3R1-v0" / "ppo" / "s1"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"algo": "ppo", "total_steps": 4096, "final_return_mean": 0.9,
                                                  "eval_return_mean": 0.9, "sps": 500.0}))
    (run / "metrics.csv").write_text("global_step,rollout/episodes,rollout/success_rate\n"
                                     + "".join(f"{1024 * (i + 1)},4,1.0\n" for i in range(4)))
    write_report(out, runs, {"MiniGrid-KeyCorridorS3R1-v0": {"steps": 4096}}, ["ppo"], [1], "cmd")
    md = (out / "results.md").read_text()
    assert "MiniGrid-DoorKey-5x5-v0 (100352 steps; RL Zoo's PPO return: 0.964)" in md
    assert "MiniGrid-KeyCorridorS3R1-v0 (4096 steps; RL Zoo's PPO return: 0.949)" in md
    assert (out / "curves_MiniGrid-DoorKey-5x5-v0.png").read_bytes() == b"committed"
    assert (out / "curves_MiniGrid-KeyCorridorS3R1-v0.png").stat().st_size > 1000
