"""experiments/dt_mujoco_benchmark.py and experiments/dt_speed.py (issue 55 items 4 and 5): the report's statistics
by hand, bad inputs in one line, and (slow) a --quick sweep on datasets a tiny PPO run made, resumed by skipping."""
import csv

import numpy as np
import pytest

from core.config.errors import ConfigError
from core.run.cli import main as dapo
from experiments import dt_mujoco_benchmark as bench


@pytest.fixture(autouse=True)
def minari_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))


def test_ratio_of_means_and_its_bootstrap_ci():
    r, lo, hi = bench.ratio_ci([2.0, 4.0], [1.0, 3.0])
    assert r == pytest.approx(1.5)  # mean 3 / mean 2
    assert 2.0 / 3.0 <= lo <= r <= hi <= 4.0  # every resample lies between min/max and max/min


def test_report_tables(tmp_path):
    rows = [{"env": "E", "dataset": "medium", "algo": a, "seed": s, "normalised_score": v}
            for a, vals in (("dt", [10.0, 20.0, 30.0]), ("dapo-dt", [15.0, 30.0, 45.0])) for s, v in zip((1, 2, 3), vals)]
    curves = [{"env": "E", "dataset": "medium", "algo": "dt", "seed": 1, "gradient_step": g, "normalised_score": v}
              for g, v in ((5, 1.0), (10, 10.0))]
    text = bench.report(tmp_path, rows, curves, "cmd")
    assert "| dt | 3 | 20.0 [" in text and "20.0 +- 10.0" in text  # IQM of 3 values = their middle one's mean
    assert "dapo-dt / dt (ratio of mean normalised scores): 1.50" in text
    assert "| dt | 1.0 | 10.0 |" in text
    with open(tmp_path / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == 6


def test_a_missing_dataset_is_one_line_before_any_run(tmp_path):
    """A ConfigError: experiments.sweep.script_main prints it as one line and exits 2."""
    with pytest.raises(ConfigError, match="no local Minari dataset 'nothing/here/medium-v0'") as e:
        bench.main(["--data", "Hopper-v5=nothing/here", "--quick", "--out", str(tmp_path / "out"),
                    "--runs-dir", str(tmp_path / "runs")])
    assert "\n" not in str(e.value)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


def test_bad_flags_are_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--data", "Hopper-v5", "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
def test_quick_sweep_writes_results_and_skips_finished_runs(tmp_path, capsys):
    run = tmp_path / "ppo"
    assert dapo(["run", "--algo", "ppo", "--env", "InvertedPendulum-v5", "--total-steps", "4096", "--snapshot-every",
                 "2048", "--eval-episodes", "0", "--no-progress", "--no-tensorboard", "--run-dir", str(run)]) == 0
    assert dapo(["dataset", "d4rl", "--env", "InvertedPendulum-v5", "--run", str(run), "--namespace", "ip/q",
                 "--steps", "300", "--select-episodes", "1", "--ref-episodes", "2", "--num-envs", "2"]) == 0
    args = ["--data", "InvertedPendulum-v5=ip/q", "--quick", "--seeds", "1", "--datasets", "medium-replay",
            "--algos", "dt", "dapo-dt", "--out", str(tmp_path / "out"), "--runs-dir", str(tmp_path / "runs")]
    assert bench.main(args) == 0
    with open(tmp_path / "out" / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert {"env", "dataset", "algo", "seed", "gradient_steps", "normalised_score", "return_mean",
            "wall_time_s"} <= set(rows[0])
    assert sorted(r["algo"] for r in rows) == ["dapo-dt", "dt"] and {r["gradient_steps"] for r in rows} == {"10"}
    assert all(np.isfinite(float(r["normalised_score"])) for r in rows)
    capsys.readouterr()
    assert bench.main(args) == 0  # finished runs are skipped
    assert capsys.readouterr().out.count("skip ") == 2
    assert "## InvertedPendulum-v5, medium-replay" in (tmp_path / "out" / "results.md").read_text()


# --- experiments/dt_speed.py -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_hf_decision_transformer_computes_ours_on_copied_weights(tmp_path, activation):
    """Our DT and transformers' DecisionTransformerModel with our weights: the same actions, loss and gradients."""
    from experiments import dt_speed

    tr = dt_speed.our_trainer(dt_speed.write_dataset(tmp_path / "minari", episodes=3, length=40), tmp_path / "run", 1,
                              activation)
    hf = dt_speed.hf_model(tr.model)
    batch = tr.data.sample(8, dt_speed.K, np.random.default_rng(0), tr.device)
    check = dt_speed.check_same(tr, hf, batch)
    assert check["loss_diff"] < 1e-6 and check["action_diff"] < 1e-5 and check["grad_diff"] < 1e-6, check
    assert check["loss_ours"] > 0


@pytest.mark.slow
def test_speed_script_writes_its_report(tmp_path):
    from experiments import dt_speed

    out = tmp_path / "speed.md"
    assert dt_speed.main(["--reps", "2", "--steps", "1", "--warmup", "0", "--no-profile", "--out", str(out)]) == 0
    text = out.read_text()
    assert "| 2 | HF |" in text and "Median ratio" in text and "| ours |" in text
