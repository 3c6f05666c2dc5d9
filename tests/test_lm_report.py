"""experiments/lm_report.py: the bootstrap CI of a difference by hand, and a report from synthetic runs."""
import json
from types import SimpleNamespace

import pytest

from experiments.lm_report import diff_ci, report


def test_diff_ci_by_hand():
    assert diff_ci([1, 1, 1], [0, 0, 0]) == (1.0, 1.0, 1.0)
    d, lo, hi = diff_ci([0.5, 0.6, 0.7], [0.5, 0.6, 0.7])
    assert d == 0 and lo < 0 < hi and lo >= -0.2 and hi <= 0.2


def test_report_from_rows(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    (runs / "add").mkdir(parents=True)
    out.mkdir()
    for algo, base in (("grpo-lm", 0.4), ("dapo-lm", 0.6), ("trl-grpo-dapo-loss", 0.5)):
        for seed in (1, 2, 3):
            row = {"algo": algo, "task": "add", "seed": seed, "answers_generated": 3840, "updates": 120,
                   "wall_time_s": 100.0, "answers_per_s": 40.0 if algo != "trl-grpo-dapo-loss" else 20.0,
                   "tokens_per_s": 1000.0, "heldout_accuracy": base + 0.01 * seed, "heldout_accuracy_sampled": base,
                   "peak_rss_mb": 900.0}
            (runs / "add" / f"{algo}__s{seed}.row.json").write_text(json.dumps(row))
    (runs / "add" / "trl-grpo-dapo-loss-maskpos__s1.row.json").write_text(json.dumps({**row, "algo": "retired"}))
    args = SimpleNamespace(task="add", runs_dir=runs, out=out, answers=3840, seeds=3, trl_seeds=3, warm_steps=400,
                           no_default_run=True)
    report(args)
    md = (out / "results.md").read_text()
    assert ("Command: `python -m experiments.lm_benchmark --task add --answers 3840 --seeds 3 --trl-seeds 3 "
            "--no-default-run`;") in md
    assert "the 9 runs in the tables took 15 min of wall clock together" in md  # 9 x 100 s; no invocation time
    assert "retired" not in md
    assert "| + dynamic sampling = dapo-lm | 3 | 0.610, 0.620, 0.630 | 0.620 +- 0.010 |" in md
    assert "+0.200 [+0.187, +0.213] *" in md  # dapo-lm vs grpo-lm: the seeds' spread of 0.01 either way
    assert ("vs TRL GRPOTrainer, loss_type=dapo: answers/s ratio 2.00x (of the means; per seed, the two runs back "
            "to back: median 2.00x") in md
    rows = (out / "results.csv").read_text().splitlines()
    assert rows[0].startswith("algo,task,seed,answers_generated") and len(rows) == 10
    with pytest.raises(FileNotFoundError):
        (out / "curves.png").read_bytes()  # no metrics.csv: no curves


def test_command_names_the_rungs_run():
    from experiments.lm_report import command

    args = SimpleNamespace(task="add", answers=3840, seeds=5, trl_seeds=0, warm_steps=400, no_default_run=True,
                           rungs=["lm-token-loss", "dapo-lm"])
    assert command(args) == ("python -m experiments.lm_benchmark --task add --answers 3840 --seeds 5 --trl-seeds 0 "
                             "--rungs lm-token-loss dapo-lm --no-default-run")
    args.rungs = ["grpo-lm", "lm-overlong-filter", "lm-clip-higher", "lm-soft-penalty", "lm-token-loss", "dapo-lm"]
    assert "--rungs" not in command(args)
