"""Decision Transformers on D4RL-style MuJoCo data (issue 55 item 4): dt, dapo-dt, bc and pct-bc on the same
datasets and budgets, scored as D4RL scores (normalised: 0 random, 100 the expert that made the data).

Every ``ENV=NAMESPACE`` names the datasets ``dapo dataset d4rl`` wrote (``NAMESPACE/medium-v0`` ...).  For every env,
dataset, algorithm and seed one ``dapo run`` runs in its own process under ``RUNS/<env>/<dataset>/<algo>/s<seed>``
(resumable: finished runs are skipped, interrupted ones resumed).  Settings are the DT paper's MuJoCo ones where the
budget allows (context 20, width 128, 3 layers, 1 head, ReLU, dropout 0.1, batch 64, AdamW lr 1e-4, weight decay 1e-4,
gradient clip 0.25, warm-up the first 10% of the steps) and ``--grad-steps`` gradient steps (the paper: 100k).  The
final policy is scored over ``--eval-episodes`` (10) whole episodes; evaluations every ``--eval-every`` steps give
the score-versus-steps table that shows where the ordering settles.

The report (``results.md``, ``results.csv``, ``curves.csv``): per env and dataset, each algorithm's IQM normalised
score over seeds with a 95% bootstrap CI, mean +- sample std and the per-seed scores; dapo-dt / dt (ratio of mean
normalised scores, bootstrap CI over seeds; the source claims >= 1.28); DT and %BC against BC on medium-replay.

    python -m experiments.dt_mujoco_benchmark --data Hopper-v5=dapo/hopper HalfCheetah-v5=dapo/halfcheetah \\
        --seeds 1 2 3 4 5 --grad-steps 2000
    python -m experiments.dt_mujoco_benchmark --data InvertedPendulum-v5=ip/dapo --quick --seeds 1   # a smoke test
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from experiments.notes import write_results_md
from experiments.result_rows import merge_rows, read_rows, write_rows
from experiments.stats import mean_pm_std, stratified_bootstrap_ci
from experiments.sweep import ROOT, caller_path, failures, parser, positive_int, run_cli, run_jobs, script_main, seed_int

ALGOS = ("dt", "dapo-dt", "bc", "pct-bc")
DATASETS = ("medium", "medium-replay", "medium-expert")
PAPER = ["--context-len", "20", "--n-embd", "128", "--n-layer", "3", "--n-head", "1", "--dropout", "0.1", "--activation", "relu", "--lr", "1e-4",
         "--weight-decay", "1e-4", "--max-grad-norm", "0.25"]
QUICK = {"grad_steps": 10, "eval_every": 5, "eval_episodes": 2, "batch_size": 8}
QUICK_MODEL = ["--context-len", "5", "--n-embd", "16", "--n-layer", "1", "--n-head", "1", "--eval-max-steps", "50"]
KEY = ("env", "dataset", "algo", "seed")


def run_path(runs: Path, env: str, dataset: str, algo: str, seed: int) -> Path:
    return runs / env.replace("/", "-") / dataset / algo / f"s{seed}"


def dataset_id(namespace: str, dataset: str) -> str:
    return f"{namespace}/{dataset}-v0"


def flags(env: str, namespace: str, dataset: str, algo: str, seed: int, a) -> list[str]:
    """The ``dapo run`` flags of one run."""
    model = QUICK_MODEL if a.quick else PAPER
    return ["--algo", algo, "--env", env, "--dataset", dataset_id(namespace, dataset), "--seed", str(seed),
            "--grad-steps", str(a.grad_steps), "--batch-size", str(a.batch_size),
            "--warmup-steps", str(max(1, a.grad_steps // 10)), "--eval-every", str(a.eval_every),
            "--eval-episodes", str(a.eval_episodes), *model, "--torch-threads", "1", "--no-progress", *a.extra]


def summary_row(run: Path) -> dict:
    s = json.loads((run / "summary.json").read_text())
    return {"env": s["env"], "dataset": run.parent.parent.name, "algo": s["algo"], "seed": s["seed"],
            "gradient_steps": s["grad_steps"], "normalised_score": s.get("normalised_score"),
            "return_mean": s["eval_return_mean"], "return_std": s["eval_return_std"],
            "eval_episodes": len(s["eval_scores"]), "dataset_steps": s["dataset_steps"],
            "target_return": s["target_return"], "wall_time_s": s["wall_time_s"]}


def curve_rows(run: Path, row: dict) -> list[dict]:
    """(gradient step, normalised score) of every evaluation in a run's metrics.csv."""
    from core.training.logging import read_metrics

    m = read_metrics(run / "metrics.csv")
    scores = m.get("eval/normalised_score", [])
    return [{**{k: row[k] for k in KEY}, "gradient_step": int(x), "normalised_score": y}
            for x, y in zip(m["global_step"], scores) if y == y]


def ratio_ci(num: list[float], den: list[float], reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """``mean(num) / mean(den)`` and its 95% percentile CI, resampling the seeds of each with replacement."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    rng = np.random.default_rng(seed)
    boots = [num[rng.integers(0, len(num), len(num))].mean() / den[rng.integers(0, len(den), len(den))].mean()
             for _ in range(reps)]
    return float(num.mean() / den.mean()), *map(float, np.percentile(boots, [2.5, 97.5]))


def report(out: Path, rows: list[dict], curves: list[dict], command: str) -> str:
    from core.run.compare import iqm

    lines = [f"# Decision Transformers on D4RL-style MuJoCo data\n\nCommand: `{command}`\n\nNormalised score: "
             "100 (R - random) / (expert - random), the dataset's reference returns; the final policy over its "
             "evaluation episodes. IQM over seeds with a 95% stratified-bootstrap CI; spreads are sample std (ddof=1).\n"]
    cells: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in rows:
        if r["normalised_score"] not in (None, ""):
            cells.setdefault((r["env"], r["dataset"]), {}).setdefault(r["algo"], []).append(float(r["normalised_score"]))
    for (env, dataset), by_algo in sorted(cells.items()):
        lines += [f"\n## {env}, {dataset}\n", "| algo | seeds | IQM [95% CI] | mean +- std | per seed |",
                  "|---|---|---|---|---|"]
        for algo in ALGOS:
            v = by_algo.get(algo)
            if not v:
                continue
            lo, hi = stratified_bootstrap_ci({"x": v}) if len(v) > 1 else (float("nan"), float("nan"))
            lines.append(f"| {algo} | {len(v)} | {iqm(np.array(v)):.1f} [{lo:.1f}, {hi:.1f}] | {mean_pm_std(v, 1)} | "
                         + ", ".join(f"{x:.1f}" for x in v) + " |")
        if by_algo.get("dt") and by_algo.get("dapo-dt"):
            r, lo, hi = ratio_ci(by_algo["dapo-dt"], by_algo["dt"])
            lines.append(f"\ndapo-dt / dt (ratio of mean normalised scores): {r:.2f} [{lo:.2f}, {hi:.2f}]; the source "
                         "claims >= 1.28.")
        steps = sorted({c["gradient_step"] for c in curves if (c["env"], c["dataset"]) == (env, dataset)})
        if len(steps) > 1:
            lines += ["", "Mean normalised score versus gradient steps:", "",
                      "| algo | " + " | ".join(str(s) for s in steps) + " |", "|---|" + "---|" * len(steps)]
            for algo in ALGOS:
                at = {}
                for c in curves:
                    if (c["env"], c["dataset"], c["algo"]) == (env, dataset, algo):
                        at.setdefault(c["gradient_step"], []).append(float(c["normalised_score"]))
                if at:
                    lines.append(f"| {algo} | " + " | ".join(f"{np.mean(at[s]):.1f}" if s in at else "-" for s in steps)
                                 + " |")
    write_rows(out / "results.csv", rows)
    write_rows(out / "curves.csv", curves)
    text = "\n".join(lines) + "\n"
    write_results_md(out / "results.md", text)
    return text


def plan_timing(steps: int, batch: int, episodes: int, env: str = "HalfCheetah-v5") -> str:
    """CPU seconds per gradient step of each algorithm (the paper's model, ``batch``) and of one evaluation of
    ``episodes`` whole episodes of ``env``, on a synthetic dataset of its shape: the numbers the compute plan needs."""
    import tempfile
    import time

    import torch

    from dapo_dt.config import DTConfig, resolve
    from dapo_dt.trainer import DTTrainer
    from experiments.dt_speed import write_dataset

    lines = [f"| algo | s per gradient step (batch {batch}) | s per evaluation ({episodes} episodes of {env}) |",
             "|---|---|---|"]
    with tempfile.TemporaryDirectory() as d:
        path = write_dataset(Path(d) / "minari", episodes=10, length=1000)
        for algo in ALGOS:
            cfg = resolve(DTConfig(dataset_path=str(path), env=env, algo=algo, batch_size=batch, context_len=20,
                                   n_embd=128, n_layer=3, n_head=1, activation="relu", grad_steps=10**6,
                                   eval_episodes=episodes, eval_max_steps=1000, torch_threads=1, device="cpu",
                                   precision="fp32"))
            tr = DTTrainer(cfg, Path(d) / algo)
            tr.train_step()  # untimed: first-call costs
            t0 = time.process_time()
            for _ in range(steps):
                tr.train_step()
            per_step = (time.process_time() - t0) / steps
            t0 = time.process_time()
            tr.evaluate() if algo == "dt" else None
            evaluation = time.process_time() - t0 if algo == "dt" else float("nan")
            lines.append(f"| {algo} | {per_step:.2f} | {evaluation:.0f} |")
    torch.set_num_threads(1)
    return "\n".join(lines)


def main(argv=None, prog=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = parser(prog, __doc__)
    p.add_argument("--data", nargs="+", required=True, metavar="ENV=NAMESPACE",
                   help="an env and the namespace of its 'dapo dataset d4rl' datasets, e.g. Hopper-v5=dapo/hopper")
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=[*DATASETS, "expert"])
    p.add_argument("--algos", nargs="+", default=list(ALGOS), choices=list(ALGOS))
    p.add_argument("--seeds", nargs="+", type=seed_int, default=[1, 2, 3, 4, 5])
    p.add_argument("--grad-steps", type=positive_int, default=2000, help="offline gradient steps per run [2000]")
    p.add_argument("--batch-size", type=positive_int, default=64, help="sequences per gradient step [64]")
    p.add_argument("--eval-every", type=positive_int, default=500, help="gradient steps between evaluations [500]")
    p.add_argument("--eval-episodes", type=positive_int, default=10, help="episodes per evaluation [10]")
    p.add_argument("--quick", action="store_true",
                   help="a smoke test: 10 gradient steps of a 1-layer width-16 model, 2 evaluation episodes of <= 50 "
                        "steps (overrides --grad-steps, --batch-size, --eval-every, --eval-episodes)")
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="further 'dapo run' flags for every run")
    p.add_argument("--jobs", type=positive_int, default=2, help="runs in parallel [2]")
    p.add_argument("--out", type=caller_path, default=ROOT / "experiments" / "results" / "dt_mujoco")
    p.add_argument("--runs-dir", type=caller_path, default=ROOT / "runs" / "dt_mujoco")
    p.add_argument("--report-only", action="store_true", help="rebuild the report from finished runs")
    p.add_argument("--plan-timing", type=positive_int, metavar="STEPS",
                   help="only time STEPS gradient steps of each algorithm (--batch-size) and one evaluation "
                        "(--eval-episodes) on a synthetic HalfCheetah-shaped dataset, in CPU seconds, and exit")
    if "--plan-timing" in argv:  # no --data needed
        a, _ = p.parse_known_args([*argv, "--data", "-"])
        print(plan_timing(a.plan_timing, a.batch_size, a.eval_episodes))
        return 0
    a = p.parse_args(argv)
    try:
        data = dict(pair.split("=", 1) for pair in a.data)
    except ValueError:
        p.error("--data takes ENV=NAMESPACE pairs, e.g. Hopper-v5=dapo/hopper")
    if a.quick:
        vars(a).update(QUICK)
    from dapo_dt.data import load

    for env, ns in data.items():  # a missing dataset or one of another env: one line before any run starts
        for dataset in a.datasets:
            meta = load(dataset_id(ns, dataset))[1]
            if meta.get("env_id") not in (None, env):
                p.error(f"dataset {dataset_id(ns, dataset)} was made on {meta['env_id']}, not {env}")
    statuses = []
    if not a.report_only:
        jobs = [(run_path(a.runs_dir, env, dataset, algo, seed), flags(env, ns, dataset, algo, seed, a))
                for env, ns in data.items() for dataset in a.datasets for seed in a.seeds for algo in a.algos]
        statuses = run_jobs(jobs, run_cli, a.jobs, a.runs_dir)
    if statuses and all(s.startswith("FAILED") for s in statuses):
        return failures(statuses)
    rows, curves = [], []
    for env in data:
        for dataset in a.datasets:
            for algo in a.algos:
                for seed in a.seeds:
                    run = run_path(a.runs_dir, env, dataset, algo, seed)
                    if (run / "summary.json").exists():
                        rows.append(summary_row(run))
                        curves += curve_rows(run, rows[-1])
    a.out.mkdir(parents=True, exist_ok=True)
    rows = merge_rows(read_rows(a.out / "results.csv"), rows, KEY)
    curves = merge_rows(read_rows(a.out / "curves.csv"), curves, (*KEY, "gradient_step"))
    command = "python -m experiments.dt_mujoco_benchmark " + " ".join(x for x in argv if x != "--report-only")
    print(report(a.out, rows, curves, command))
    return failures(statuses)


if __name__ == "__main__":
    script_main(main)
