"""Benchmark scripts run end to end on a tiny budget (slow marker) and resume instead of redoing work."""
import csv
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mujoco_benchmark_tiny_sweep_and_resume(tmp_path):
    cmd = [sys.executable, "-m", "experiments.mujoco_benchmark", "--envs", "HalfCheetah-v5", "--variants", "dapo",
           "sb3-ppo", "--seeds", "1", "--total-steps", "4096", "--jobs", "2", "--out", str(tmp_path / "out"),
           "--runs-dir", str(tmp_path / "runs")]
    first = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.count("done ") == 2, first.stdout
    table = (tmp_path / "out" / "results.md").read_text()
    assert "| HalfCheetah-v5 |" in table and "IQM" in table
    assert "| sb3-ppo |" in table and "P(> dapo)" in table  # the across-envs rows against the first variant
    assert (tmp_path / "out" / "curves_HalfCheetah-v5.png").exists()
    again = subprocess.run([sys.executable, "-m", "core", "bench", "mujoco", *cmd[3:]], cwd=REPO, capture_output=True,
                           text=True, timeout=600)  # `dapo bench mujoco` is the same sweep: it skips both runs
    assert again.returncode == 0 and again.stdout.count("skip ") == 2, again.stdout
    table = (tmp_path / "out" / "results.md").read_text()
    assert "Command: `python -m experiments.mujoco_benchmark --envs HalfCheetah-v5" in table  # the script's form


def test_mujoco_report_aggregate_by_hand():
    """env a: base 0, 10 and new 20 -> normalised base 0, .5 and new 1; env b: base 5, new 5, 15 -> base 0,
    new 0, 1.  IQM (3 values: plain mean) base 1/6, new 2/3; P(new > base) = (1 + (1/2 + 1)/2) / 2 = 7/8."""
    from experiments.mujoco_report import aggregate_table
    data = [("a", "base", 0), ("a", "base", 10), ("a", "new", 20), ("b", "base", 5), ("b", "new", 5), ("b", "new", 15)]
    md = "\n".join(aggregate_table([{"env": e, "variant": v, "final_return_mean": x} for e, v, x in data], ["a", "b"],
                                   ["base", "new"]))
    assert "| base | 0.17 [" in md and "| - | 3 |" in md
    assert "| new | 0.67 [" in md and "| 0.88 | 3 |" in md


def test_crossenv_aggregate_reads_several_folders_and_refuses_conflicting_runs(tmp_path, capsys):
    """The by-hand numbers above, with env a in one folder and env b in another; seed 9 and other budgets
    and variants are filtered out; the same run with two different results is an error."""
    from experiments import mujoco_crossenv
    header = "env,variant,seed,total_steps,final_return_mean\n"
    (tmp_path / "f1").mkdir(), (tmp_path / "f2").mkdir()
    (tmp_path / "f1" / "results.csv").write_text(header + "a,base,1,1000,0\na,base,2,1000,10\na,new,1,1000,20\n"
                                                 "a,new,9,1000,-50\na,new,3,500,-50\na,other,1,1000,-50\n")
    (tmp_path / "f2" / "results.csv").write_text(header + "b,base,1,1000,5\nb,new,1,1000,5\nb,new,2,1000,15\n")
    argv = ["--folders", str(tmp_path / "f1"), str(tmp_path / "f2"), "--variants", "base", "new", "--seeds", "1", "2",
            "--envs", "a", "b", "--total-steps", "1000"]
    mujoco_crossenv.main(argv)
    md = capsys.readouterr().out
    assert "| base | 0.17 [" in md and "| - | 3 |" in md
    assert "| new | 0.67 [" in md and "| 0.88 | 3 |" in md
    (tmp_path / "f3").mkdir()
    (tmp_path / "f3" / "results.csv").write_text(header + "b,new,2,1000,16\n")
    with pytest.raises(SystemExit, match="two different results"):
        mujoco_crossenv.main([*argv, "--folders", str(tmp_path / "f2"), str(tmp_path / "f3")])


def test_mujoco_report_robustness_grid_by_hand():
    """ppo cells (seed means): lr 1e-4 -> 100 (clip .1), 300 (clip .2, seeds 200 and 400); lr 3e-4 -> 200, 400.
    Spread: mean 250, sample std sqrt(50000 / 3) = 129, worst 100, best 400, worst / best 0.25; the one cell
    with two seeds has seed std 141 (sample std of 200 and 400, 100 sqrt(2))."""
    from experiments.mujoco_report import _robustness
    data = [("ppo-lr1e-4-clip0.1", 100), ("ppo-lr1e-4-clip0.2", 200), ("ppo-lr1e-4-clip0.2", 400),
            ("ppo-lr3e-4-clip0.1", 200), ("ppo-lr3e-4-clip0.2", 400), ("dapo", 999)]
    rows = [{"env": "E", "variant": v, "final_return_mean": x} for v, x in data]
    md = "\n".join(_robustness(rows, ["E"], list(dict.fromkeys(v for v, _ in data))))
    assert "| lr / clip | 0.1 | 0.2 |" in md
    assert "| 1e-4 | 100 | 300 |" in md and "| 3e-4 | 200 | 400 |" in md
    assert ("mean 250, std 129, worst 100, best 400, worst / best 0.25; "
            "seed std within a cell 141 (mean over 1 cells, 1-2 seeds each)") in md
    one_seed_rows = [r for r in rows if (r["variant"], r["final_return_mean"]) != ("ppo-lr1e-4-clip0.2", 400)]
    one_seed = "\n".join(_robustness(one_seed_rows, ["E"], list(dict.fromkeys(v for v, _ in data))))
    assert "worst / best 0.25\n" in one_seed and "; seed std" not in one_seed  # one seed per cell: no noise term
    assert "999" not in md  # variants outside the grid are left out
    assert _robustness(rows[-1:], ["E"], ["dapo"]) == []


@pytest.mark.slow
def test_throughput_benchmark_tiny(tmp_path):
    cmd = [sys.executable, "-m", "experiments.bench_throughput", "--parts", "acd", "--total-steps", "4096",
           "--repeats", "1", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = (tmp_path / "results.md").read_text()
    assert "(a) Equal hyper-parameters" in report and "(d) DAPO's per-iteration overhead" in report



@pytest.mark.slow
def test_minigrid_throughput_benchmark_tiny(tmp_path):
    cmd = [sys.executable, "-m", "experiments.bench_minigrid", "--total-steps", "2048", "--repeats", "1",
           "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = (tmp_path / "results.md").read_text()
    assert "SB3 PPO, our view" in report and "target >= 3.0x" in report and "MiniGrid target" in proc.stdout

def _fake_run(runs: Path, env: str, variant: str, seed: int, final: float, steps: int = 1000) -> None:
    """A finished run directory as ``dapo run`` leaves it: summary.json and metrics.csv."""
    import json
    d = runs / env / variant / f"s{seed}"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"total_steps": steps, "final_return_mean": final,
                                                "eval_return_mean": final, "wall_time_s": 1.0, "sps": 1000.0}))
    (d / "metrics.csv").write_text("global_step,rollout/ep_return_mean\n" + "".join(
        f"{s},{final}\n" for s in range(100, steps + 1, 100)))


def test_mujoco_report_keeps_committed_runs_and_refuses_other_budgets(tmp_path):
    """A fresh machine (runs/ empty but for seed 3) extends the committed seeds 1-2 instead of replacing them;
    a local run replaces its committed row; a report for another budget is refused.  Spreads are sample stds:
    (100, 300) -> 141, (100, 200, 500) -> sqrt(86667 / 2) = 208."""
    from experiments.mujoco_report import write_report
    out, first, second = tmp_path / "out", tmp_path / "machine1", tmp_path / "machine2"
    out.mkdir()
    for seed, final in ((1, 100.0), (2, 300.0)):
        _fake_run(first, "E-v5", "dapo", seed, final)
    write_report(out, first, ["E-v5"], ["dapo"], [1, 2], 1000, "sweep 1")
    assert "| E-v5 | 200 +- 141 (2)" in (out / "results.md").read_text()
    _fake_run(second, "E-v5", "dapo", 3, 500.0)
    _fake_run(second, "E-v5", "dapo", 2, 200.0)  # re-run of seed 2 replaces the committed row
    (out / "curves_E-v5.png").unlink()
    write_report(out, second, ["E-v5"], ["dapo"], [2, 3], 1000, "sweep 2")
    md = (out / "results.md").read_text()
    assert "| E-v5 | 267 +- 208 (3)" in md and "made 2 of the 3 runs" in md and "seeds [1, 2, 3]" in md
    assert (out / "curves_E-v5.png").exists()  # every run has a committed or local curve
    curves = (out / "curves.csv").read_text().splitlines()
    assert len(curves) == 1 + 3 * 101 and "E-v5,dapo,3,1000,500.0" in curves
    with pytest.raises(SystemExit, match="holds runs of \\[1000\\] env steps, this report is for 300000"):
        write_report(out, second, ["E-v5"], ["dapo"], [2, 3], 300000, "sweep 3")


def test_mujoco_report_draws_curves_without_runs_that_have_none(tmp_path, capsys):
    """A committed run without a stored curve (one made before curves.csv existed) no longer blocks the plot:
    the others are drawn and the missing one is named."""
    from experiments.mujoco_report import write_report
    out, runs = tmp_path / "out", tmp_path / "runs"
    out.mkdir()
    for seed, final in ((1, 100.0), (2, 300.0)):
        _fake_run(runs, "E-v5", "dapo", seed, final)
    write_report(out, runs, ["E-v5"], ["dapo"], [1, 2], 1000, "sweep 1")
    lines = (out / "curves.csv").read_text().splitlines()
    (out / "curves.csv").write_text("\n".join(x for x in lines if ",dapo,1," not in x) + "\n")
    (out / "curves_E-v5.png").unlink()
    write_report(out, tmp_path / "empty", ["E-v5"], ["dapo"], [1, 2], 1000, "report only")
    assert "| E-v5 | 200 +- 141 (2)" in (out / "results.md").read_text()
    assert (out / "curves_E-v5.png").exists()
    assert "no stored learning curve for dapo/s1 (drawn without them)" in capsys.readouterr().out


def test_throughput_peers_filter_keeps_named_runs_and_raw_stepping():
    from experiments.bench_throughput import plan

    runs = plan("bc", 1000, 8, 1, 1, peers=["ours ppo x8 envs +overlap", "SB3 PPO DummyVecEnv x8"])
    names = [name for _, name, _ in runs]
    assert names[:2] == ["ours ppo x8 envs +overlap", "SB3 PPO DummyVecEnv x8"]
    assert all(name.startswith("raw") for name in names[2:]) and len(names) == 6  # x1, x8, async, envpool
    with pytest.raises(SystemExit, match="unknown --peers .'ours ppo x9'. .*choose from: ours dapo x8 envs"):
        plan("bc", 1000, 8, 1, 1, peers=["ours ppo x9"])


def test_throughput_report_with_a_subset_of_peers(tmp_path):
    """Only (b)'s overlap peer, SB3's DummyVecEnv and raw stepping: the report has (b) and (c), no (a)/(d)."""
    from types import SimpleNamespace

    from experiments.throughput_report import write_report

    def row(part, peer, sps, **extra):
        return dict(part=part, peer=peer, sps=sps, wall_s=100000 / sps, peak_rss_mb=300.0, final_return=float("nan"),
                    repeat=0, **extra)

    rows = [row("b", "ours ppo x8 envs +overlap", 4000.0, init_s=2.5, iter_s=0.4, collect_s=0.002,
                advantage_s=0.006, update_s=0.39),
            row("b", "SB3 PPO DummyVecEnv x8", 800.0), row("c", "raw env stepping x8", 5000.0)]
    args = SimpleNamespace(total_steps=100000, repeats=1, seed=1, threads=1, many_envs=8)
    write_report(rows, tmp_path, "cmd", "machine", args)
    md = (tmp_path / "results.md").read_text()
    assert "(a) Equal" not in md and "(d) DAPO" not in md
    assert "our best / SB3's best SPS: target >= 4.0x (issue #59): met (5.00 vs target 4.0)" in md
    # 4000 / 5000 end to end; 2048 / 0.4 s = 5120 SPS per iteration = 102% of raw
    assert ("ours ppo x8 envs +overlap: 80% of the raw x8 stepping rate (target >= 80% (issue #59): met; 102% per "
            "iteration") in md
    # no synchronous twin ran: no overlap-vs-sync line; with one at 5000 SPS the overlapped run is 0.80x: NOT met
    assert "overlapped at least as fast" not in md
    write_report(rows + [row("b", "ours ppo x8 envs", 5000.0, init_s=2.0, iter_s=0.5, collect_s=0.3,
                             advantage_s=0.006, update_s=0.2)], tmp_path, "cmd", "machine", args)
    md = (tmp_path / "results.md").read_text()
    assert ("ours ppo x8 envs +overlap / ours ppo x8 envs: overlapped at least as fast as synchronous: NOT met "
            "(0.80 vs target 1.0)") in md
    assert "start-up 2.5s of 25.0s" in md


def test_write_rows_unions_columns_and_a_failed_write_keeps_the_old_table(tmp_path):
    from experiments.result_rows import read_rows, write_rows

    path = tmp_path / "results.csv"
    write_rows(path, [{"env": "E", "seed": 1}, {"env": "E", "seed": 2, "sps": 10.5}])
    assert path.read_text() == "env,seed,sps\nE,1,\nE,2,10.5\n"

    class Unprintable:
        def __str__(self):
            raise RuntimeError("disk full, say")

    with pytest.raises(RuntimeError, match="disk full"):
        write_rows(path, [{"env": "E", "seed": 3}, {"env": Unprintable(), "seed": 4}])
    assert path.read_text() == "env,seed,sps\nE,1,\nE,2,10.5\n" and [p.name for p in tmp_path.iterdir()] == ["results.csv"]
    assert [r["seed"] for r in read_rows(path)] == [1, 2]


def test_normaliser_drift_script_refit_matches_the_trained_policy(tmp_path, small_config):
    """Checkpoints of one Pendulum run, 2 and 6 updates in: the bare restore moves the policy's actions,
    the refit one does not (to float rounding), and the tables are written."""
    import shutil

    from core.training.logging import MetricLogger
    from core.training.trainer import Trainer
    from experiments import normaliser_drift

    cfg = small_config(tmp_path, env="Pendulum-v1", num_envs=2, num_steps=64, total_steps=6 * 128, norm_obs=True)
    t = Trainer(cfg, tmp_path)
    t.train(MetricLogger(tmp_path, tensorboard=False), max_iterations=2)
    shutil.copy(tmp_path / "checkpoint.pt", tmp_path / "early.pt")
    t.train(MetricLogger(tmp_path, resume_step=t.global_step, tensorboard=False))
    out = tmp_path / "drift"
    normaliser_drift.main(["--early", str(tmp_path / "early.pt"), "--late", str(tmp_path / "checkpoint.pt"),
                           "--env", "Pendulum-v1", "--episodes", "1", "--out", str(out)])
    rows = {r["condition"]: r for r in csv.DictReader(open(out / "results.csv"))}
    assert float(rows["bare_restore"]["action_shift"]) > 1e-3 and float(rows["bare_restore"]["kl"]) > 1e-6
    assert float(rows["refit_restore"]["action_shift"]) < 1e-5 and float(rows["refit_restore"]["kl"]) < 1e-9
    assert float(rows["refit_restore"]["return_mean"]) == pytest.approx(float(rows["as_trained"]["return_mean"]), rel=1e-3)
    assert "| refit_restore |" in (out / "results.md").read_text()
    with pytest.raises(SystemExit, match="pass --env the run's env"):  # a checkpoint of another env
        normaliser_drift.main(["--early", str(tmp_path / "early.pt"), "--late", str(tmp_path / "checkpoint.pt"),
                               "--env", "CartPole-v1", "--out", str(out)])


def test_halfcheetah_posture_by_hand_and_end_to_end(tmp_path, small_config):
    """cos(rooty) < 0 marks the torso upside down: angles (0, pi, 3, -3, 1.5) are flipped in 3 of 5 steps.
    End to end on a 1024-step HalfCheetah run laid out like the benchmark's: one row, a share in [0, 1]
    consistent with its label, the count table; runs of another env and empty folders are refused by name."""
    import numpy as np

    from core.run.runner import run_experiment
    from experiments import halfcheetah_posture as hp

    obs = np.zeros((5, 17))
    obs[:, 1] = [0.0, np.pi, 3.0, -3.0, 1.5]
    assert hp.flipped_share(obs) == pytest.approx(0.6)

    runs = tmp_path / "runs"
    run_experiment(small_config(runs / "main" / "HalfCheetah-v5" / "dapo" / "s1", env="HalfCheetah-v5", num_envs=1,
                                num_steps=512, total_steps=1024))
    hp.main(["--runs-dir", str(runs), "--out", str(tmp_path / "out")])
    (row,) = list(csv.DictReader(open(tmp_path / "out" / "results.csv")))
    share = float(row["flipped_share"])
    assert 0 <= share <= 1 and row["posture"] == ("flipped" if share > 0.5 else "upright") and row["seed"] == "1"
    assert "| main | dapo | 1 |" in (tmp_path / "out" / "results.md").read_text()
    with pytest.raises(SystemExit, match="no finished HalfCheetah-v5 runs"):
        hp.main(["--runs-dir", str(runs), "--suites", "ablation", "--out", str(tmp_path / "out")])
    other = runs / "main" / "HalfCheetah-v5" / "ppo" / "s1"
    run_experiment(small_config(other, env="Pendulum-v1", num_envs=1, num_steps=128, total_steps=256))
    with pytest.raises(SystemExit, match="trained on Pendulum-v1"):
        hp.main(["--runs-dir", str(runs), "--out", str(tmp_path / "out")])


def test_adam_step_share_by_hand_and_end_to_end(tmp_path, small_config):
    """With eps = 1e-5, sqrt(v) = 1e-5 keeps half of a step and sqrt(v) = 1e-4 keeps 10/11; each of the two
    entries has an eps-free step |m|/sqrt(v) of 1, so the share is (0.5 + 10/11) / 2; v = 0 entries are skipped.
    End to end: PPO and DAPO runs laid out like the benchmark's give one row each with shares in (0, 1] and
    their gradient clip named from their configs."""
    from core.run.runner import run_experiment
    import torch

    from experiments import adam_step_share as ass

    m, v = torch.tensor([1e-5, 1e-4, 3.0]), torch.tensor([1e-10, 1e-8, 0.0])
    share = ass.adam_step_share([m], [v], step=1e9, eps=1e-5)
    assert share == pytest.approx((0.5 + 10 / 11) / 2)
    # bias correction at step 1: m / 0.1 and sqrt(v / 0.001) scale every eps-free step alike; eps now weighs less
    assert ass.adam_step_share([m], [v], step=1, eps=1e-5) > share
    assert ass.adam_step_share([m], [v], step=1e9, eps=0.0) == pytest.approx(1.0)

    runs = tmp_path / "runs"
    for variant, algo, joint, recipe in (("ppo", "ppo", None, None), ("dapo", "dapo", None, ("dapo-mujoco",)),
                                         ("dapo-v4", "dapo", False, None)):  # the benchmark's dapo: dapo-mujoco
        run_experiment(small_config(runs / "main" / "Pendulum-v1" / variant / "s1", env="Pendulum-v1", algo=algo,
                                    joint_grad_clip=joint, recipe=recipe, num_envs=1, num_steps=128, total_steps=256))
    ass.main(["--runs-dir", str(runs), "--variants", "ppo", "dapo", "dapo-v4", "--out", str(tmp_path / "out")])
    rows = list(csv.DictReader(open(tmp_path / "out" / "results.csv")))
    assert sorted(r["variant"] for r in rows) == ["dapo", "dapo-v4", "ppo"]
    assert all(0 < float(r[k]) <= 1 for r in rows for k in ("actor_share", "critic_share"))
    assert {r["variant"]: r["gradient_clip"] for r in rows} == {"ppo": "joint", "dapo": "joint",  # the mujoco recipe
                                                                "dapo-v4": "per network"}
    assert "| Pendulum-v1 | dapo | joint | 1 |" in (tmp_path / "out" / "results.md").read_text()
    with pytest.raises(SystemExit, match="no finished runs of grpo"):
        ass.main(["--runs-dir", str(runs), "--variants", "grpo", "--out", str(tmp_path / "out")])


def test_lambda_rule_ev_prints_one_row_per_rollout(capsys):
    """experiments/lambda_rule_ev.py trains, then reports the EV against each lambda's returns for every rollout."""
    from experiments.lambda_rule_ev import main
    main(["--env", "Pendulum-v1", "--steps", "4096", "--rollouts", "2", "--lambdas", "0.9", "1.0"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert "after 4096 steps" in out and len(rows) == 2
    assert all(-10 < float(x) <= 1 for row in rows for x in row.strip("| ").split(" | ")[1:])


def test_a_column_named_after_an_algorithm_says_which_recipe_it_ran():
    """'dapo' alone is --algo dapo's own settings; the 1M tables' dapo column ran the dapo-mujoco recipe and says so;
    labels that are variant names stay as they are; the committed 1M folders' record names the column's recipe."""
    from experiments.mujoco_report import column_label, column_recipes

    assert column_label("dapo", "dapo") == "dapo (dapo-mujoco recipe)"
    assert column_label("dapo", "dapo-v1") == "dapo"  # the 300k tables' dapo: today's --algo dapo, field for field
    assert column_label("grpo", "grpo") == "grpo" and column_label("ppo", "ppo-recipe") == "ppo (ppo-recipe recipe)"
    assert column_label("dapo-v7", "dapo-confirm-kl0.05-brake") == "dapo-v7" and column_label("sb3-ppo", None) == "sb3-ppo"
    assert column_recipes(REPO / "experiments/results/mujoco_1M", ["dapo", "nope"]) == {"dapo": "dapo", "nope": None}
