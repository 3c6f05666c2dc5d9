"""Sparse-reward suite (issue #49): ppo, grpo, dapo and two sampler peers on MiniGrid.

Tasks with their budgets and the variants are data: ``experiments/recipes/sparse_suite.yaml`` names them, one recipe
file per variant in ``experiments/recipes/sparse/``; every variant runs on the minigrid env family's recipe (RL Zoo's
PPO settings), so network, normalisation, gradient clip and schedules are the same for all.  Each run is a
``dapo run`` in ``RUNS/<env>/<variant>/s<seed>`` (skipped when finished, resumed when interrupted).  Per run:

- ``success_rate``: the share of training episodes that reached the goal over the last 10% of the budget;
- ``steps_to_90``: the first env step at which the success rate over the preceding 10 updates (a full window
  holding at least 20 episodes) reaches 0.9 (NaN if never);
- ``final_return``: the run's mean return over its last 10 training episodes (MiniGrid's reward,
  ``1 - 0.9 steps / max_steps`` on success), comparable with RL Zoo's PPO table;
- ``eval_return``: 20 evaluation episodes of the final policy (sampled actions).

The report (``results.csv``, ``results.md``, ``curves_<env>.png``) gives per task mean +- sample std (ddof=1),
the median steps to 90% with how many runs got there, and each variant's ratio of median steps to PPO's with a
bootstrap 95% CI (runs that never got there count as the budget, so such ratios are lower bounds).

    python -m experiments.sparse_benchmark --tasks MiniGrid-DoorKey-5x5-v0 --seeds 1 2 3 4 5
    python -m experiments.sparse_benchmark --quick                     # minutes: DoorKey-5x5, 2 variants, 8k steps
"""
from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from experiments.sweep import (ROOT, caller_path, failures, parser, positive_int, run_cli, run_jobs, script_main,
                               seed_int)

SUITE_FILE = ROOT / "experiments" / "recipes" / "sparse_suite.yaml"
RECIPES = ROOT / "experiments" / "recipes" / "sparse"
WINDOW, THRESHOLD, FINAL_SHARE, EVAL_EPISODES, REPS = 10, 0.9, 0.1, 20, 2000
MIN_EPISODES = 20  # a window's rate counts from this many episodes: one lucky early episode is not "90% success"


def load_suite() -> dict:
    import yaml

    return yaml.safe_load(SUITE_FILE.read_text())


def run_one(runs: Path, env: str, variant: str, seed: int, steps: int) -> str:
    return run_cli(runs / env / variant / f"s{seed}",
                   ["--env", env, "--recipe", str(RECIPES / f"{variant}.yaml"), "--seed", str(seed), "--total-steps",
                    str(steps), "--eval-episodes", str(EVAL_EPISODES), "--no-progress", "--no-tensorboard"])


def success_curve(metrics: dict[str, list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """(steps, success rate over the WINDOW updates ending at each step), episode-weighted; NaN until the window is
    full and holds MIN_EPISODES episodes (before that a single lucky episode would read as 100% success)."""
    steps = np.asarray(metrics["global_step"])
    episodes = np.nan_to_num(np.asarray(metrics["rollout/episodes"]))
    rate = np.asarray(metrics.get("rollout/success_rate", [np.nan] * len(steps)))
    wins, seen = _window_sums(np.nan_to_num(rate) * episodes), _window_sums(episodes)
    with np.errstate(invalid="ignore", divide="ignore"):
        full = np.arange(len(steps)) >= WINDOW - 1
        return steps, np.where(full & (seen >= max(MIN_EPISODES, 1)), wins / seen, np.nan)


def _window_sums(x: np.ndarray) -> np.ndarray:
    """Sum of the last WINDOW entries up to each position (fewer at the start)."""
    c = np.cumsum(x)
    return c - np.concatenate([np.zeros(min(WINDOW, len(c))), c[:-WINDOW]])


def run_row(run: Path, env: str, variant: str, seed: int) -> dict:
    """One results.csv row from a finished run directory."""
    from core.training.logging import read_metrics

    summary = json.loads((run / "summary.json").read_text())
    m = read_metrics(run / "metrics.csv")
    steps, rate = success_curve(m)
    hit = np.flatnonzero(rate >= THRESHOLD)
    last = np.asarray(m["global_step"]) > (1 - FINAL_SHARE) * summary["total_steps"]
    episodes = np.nan_to_num(np.asarray(m["rollout/episodes"]))[last]
    wins = (np.nan_to_num(np.asarray(m["rollout/success_rate"])[last]) * episodes).sum()
    from experiments.bench_throughput import cpu_name

    return {"env": env, "algo": summary["algo"], "recipe": variant, "seed": seed,
            "total_steps": summary["total_steps"], "final_return": round(summary["final_return_mean"], 4),
            "success_rate": round(float(wins / episodes.sum()), 4) if episodes.sum() else float("nan"),
            "steps_to_90": int(steps[hit[0]]) if len(hit) else float("nan"),
            "eval_return": round(summary["eval_return_mean"], 4), "sps": round(summary["sps"], 1), "cpu": cpu_name()}


def median_ratio_ci(x: np.ndarray, y: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """median(x) / median(y) and its percentile-bootstrap 95% CI (seeds resampled within each group)."""
    rng = np.random.default_rng(seed)
    boot = [np.median(rng.choice(x, len(x))) / np.median(rng.choice(y, len(y))) for _ in range(REPS)]
    return float(np.median(x) / np.median(y)), float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


def task_table(rows: list[dict], env: str, variants: list[str], budget: int, zoo) -> list[str]:
    from core.run.evaluation import sample_std

    def cell(values) -> str:
        v = np.asarray(values, dtype=float)
        return f"{v.mean():.3f} +- {sample_std(v):.3f}" if len(v) else "-"

    by = {v: [r for r in rows if r["env"] == env and r["recipe"] == v] for v in variants}
    ppo = np.array([r["steps_to_90"] for r in by.get("ppo", [])], dtype=float)
    out = [f"### {env} ({budget} steps; RL Zoo's PPO return: {zoo if zoo is not None else 'n/a'})", "",
           "| variant | runs | success rate | final return | eval return | reached 90% | median steps to 90% | "
           "ratio to PPO [95% CI] |", "|---|---|---|---|---|---|---|---|"]
    for v, rs in by.items():
        if not rs:
            continue
        steps = np.array([r["steps_to_90"] for r in rs], dtype=float)
        reached = int(np.isfinite(steps).sum())
        capped = np.where(np.isfinite(steps), steps, budget)
        ratio = "-"
        if v != "ppo" and len(ppo):
            r, lo, hi = median_ratio_ci(capped, np.where(np.isfinite(ppo), ppo, budget))
            ratio = f"{r:.2f} [{lo:.2f}, {hi:.2f}]" + ("" if reached == len(rs) and np.isfinite(ppo).all() else " (censored)")
        median = f"{np.median(capped):.0f}" + ("" if reached == len(rs) else " (>=)")
        out.append(f"| {v} | {len(rs)} | {cell([r['success_rate'] for r in rs])} | {cell([r['final_return'] for r in rs])} "
                   f"| {cell([r['eval_return'] for r in rs])} | {reached}/{len(rs)} | {median} | {ratio} |")
    return out


def plot(out: Path, runs: Path, rows: list[dict], env: str, variants: list[str], budget: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from core.training.logging import read_metrics

    grid = np.linspace(0, budget, 101)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for v in variants:
        curves = []
        for r in (r for r in rows if r["env"] == env and r["recipe"] == v):
            path = runs / env / v / f"s{r['seed']}" / "metrics.csv"
            if path.exists():
                steps, rate = success_curve(read_metrics(path))
                ok = np.isfinite(rate)
                curves.append(np.interp(grid, steps[ok], rate[ok], left=np.nan) if ok.any() else grid * np.nan)
        if curves:
            with warnings.catch_warnings():  # grid points before any run's first episode are all NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(curves, axis=0)
                sd = np.nanstd(curves, axis=0, ddof=1) if len(curves) > 1 else None
            ax.plot(grid, mean, label=f"{v} ({len(curves)})")
            if sd is not None:
                ax.fill_between(grid, mean - sd, mean + sd, alpha=0.15)
    ax.axhline(THRESHOLD, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="env steps", ylabel=f"success rate (last {WINDOW} updates)", title=env, ylim=(0, 1.02))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"curves_{env}.png", dpi=110)
    plt.close(fig)


def write_report(out: Path, runs: Path, tasks: dict, variants: list[str], seeds, command: str) -> None:
    from experiments.bench_throughput import machine
    from experiments.notes import write_results_md
    from experiments.result_rows import merge_rows, read_rows, write_rows

    local = [run_row(runs / env / v / f"s{s}", env, v, s) for env in tasks for v in variants for s in seeds
             if (runs / env / v / f"s{s}" / "summary.json").exists()]
    rows = merge_rows(read_rows(out / "results.csv"), local, ("env", "recipe", "seed"))
    if not rows:
        print("no finished runs yet")
        return
    write_rows(out / "results.csv", rows)
    envs = list(dict.fromkeys(r["env"] for r in rows))
    order = list(dict.fromkeys([*variants, *(r["recipe"] for r in rows)]))
    md = [f"# Sparse-reward suite ({time.strftime('%Y-%m-%d')})", "", f"Command: `{command}`", "",
          f"Machine: {machine(with_load=False)}. Cells: mean +- sample std (ddof=1) over seeds. Success rate: "
          f"episodes that reached the goal over the last {FINAL_SHARE:.0%} of training; steps to 90%: first step whose "
          f"last {WINDOW} updates' episodes succeeded at {THRESHOLD:.0%}; runs that never got there count as the "
          "budget ((>=), ratios then marked censored).", ""]
    for env in envs:
        budget = max(r["total_steps"] for r in rows if r["env"] == env)
        md += task_table(rows, env, order, budget, load_suite()["tasks"].get(env, {}).get("rl_zoo_ppo")) + [""]
        md += [f"![{env}](curves_{env}.png)", ""]
        if env in tasks:  # the tasks this invocation ran: the other tasks' committed curves stay as they are
            plot(out, runs, rows, env, order, budget)
    write_results_md(out / "results.md", "\n".join(md))
    print("\n".join(md))


def main(argv=None, prog=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    suite = load_suite()
    p = parser(prog, __doc__)
    p.add_argument("--tasks", nargs="+", default=list(suite["tasks"]), help="MiniGrid ids from the suite (default: all)")
    p.add_argument("--variants", nargs="+", default=list(suite["variants"]), help="rows of the suite (default: all)")
    p.add_argument("--seeds", nargs="+", type=seed_int, default=[1, 2, 3, 4, 5])
    p.add_argument("--total-steps", type=positive_int, help="override every task's budget (default: the suite's)")
    p.add_argument("--jobs", type=positive_int, default=2, help="runs in parallel")
    p.add_argument("--out", type=caller_path, default=ROOT / "experiments" / "results" / "sparse")
    p.add_argument("--runs-dir", type=caller_path, default=ROOT / "runs" / "sparse")
    p.add_argument("--quick", action="store_true", help="smoke preset: DoorKey-5x5, ppo and dapo, 2 seeds, 8192 steps")
    p.add_argument("--report-only", action="store_true", help="rebuild the report from finished runs (notes kept)")
    args = p.parse_args(argv)
    if args.quick:
        args.tasks, args.variants, args.seeds, args.total_steps = ["MiniGrid-DoorKey-5x5-v0"], ["ppo", "dapo"], [1, 2], 8192
    for names, known, what in ((args.tasks, suite["tasks"], "tasks"), (args.variants, suite["variants"], "variants")):
        unknown = sorted(set(names) - set(known))
        if unknown:
            p.error(f"unknown {what} {unknown}; choose from {sorted(known)}")
    tasks = {t: suite["tasks"][t] for t in args.tasks}
    statuses = []
    if not args.report_only:
        jobs = [(args.runs_dir, env, v, s, args.total_steps or tasks[env]["steps"])
                for env in tasks for s in args.seeds for v in args.variants]
        statuses = run_jobs(jobs, run_one, args.jobs, args.runs_dir)
    if statuses and all(s.startswith("FAILED") for s in statuses):
        return failures(statuses)
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python -m experiments.sparse_benchmark " + " ".join(a for a in argv if a != "--report-only")
    write_report(args.out, args.runs_dir, tasks, args.variants, args.seeds, command)
    return failures(statuses)


if __name__ == "__main__":
    script_main(main)
