"""Multi-agent benchmark (issue #5): simple_spread_v3 with IPPO, MAPPO, DAPO-MA and MADDPG.

Task: mpe2 ``simple_spread_v3``, ``N=3 local_ratio=0.5 max_cycles=25``, discrete actions.
Return convention: mpe2 rewards summed over the 25 steps of an episode for each agent, then
averaged over the 3 agents ("per-agent return").  Env steps are joint steps (all agents act once)
summed over env copies.

For every algorithm and seed a run goes to ``--runs-dir``; finished runs (summary.json present) are
skipped and interrupted ones resumed, so the script can be re-run.  Outputs in ``--out``:
results.csv (one row per run), results.md (table: final return per seed, IQM with a bootstrap 95%
CI over seeds, env steps to thresholds) and learning_curves.png.

    python -m experiments.ma_benchmark --steps 150000 --seeds 5 --jobs 2
"""
from __future__ import annotations

import json
import math
import sys
import platform
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from experiments.notes import write_results_md
from experiments.result_rows import write_rows
from experiments.stats import iqm, mean_pm_std, steps_to_threshold, stratified_bootstrap_ci
from experiments.sweep import ROOT, caller_path, parser, positive_int, script_main
from core.run.plotting import finish_figure

ALGOS = ("ippo", "mappo", "dapo-ma", "maddpg")
ENV, ENV_KWARGS = "simple_spread_v3", "N=3 local_ratio=0.5 max_cycles=25"
GRID = 2_000           # learning curves are interpolated onto this step grid
SMOOTH = 10            # iterations in the moving average used for curves and thresholds
FINAL_ITERS = 10       # final return = mean episode return over the last FINAL_ITERS iterations


def run_one(algo: str, seed: int, steps: int, run_dir: str) -> str:
    """Train one run (or resume it); returns its directory."""
    import torch

    from dapo_ma.config import MAConfig
    from dapo_ma.runner import run_experiment

    torch.set_num_threads(1)
    path = Path(run_dir)
    if (path / "summary.json").exists():
        return run_dir
    cfg = MAConfig(env=ENV, env_kwargs=ENV_KWARGS, algo=algo, seed=seed, total_steps=steps, run_dir=run_dir,
                   progress=False, tensorboard=False, eval_episodes=20)
    run_experiment(cfg, resume=(path / "checkpoint.pt").exists())
    return run_dir


def random_returns(seed: int, episodes: int) -> list[float]:
    """Per-agent returns of the uniform random policy."""
    import torch

    from dapo_ma.config import MAConfig
    from dapo_ma.evaluation import evaluate

    class Uniform:
        def act(self, obs, agent_id, deterministic):
            return torch.randint(5, agent_id.shape, generator=gen)

    gen = torch.Generator().manual_seed(seed)
    cfg = MAConfig(env=ENV, env_kwargs=ENV_KWARGS)
    return evaluate(cfg, Uniform(), episodes, seed + 10_000, torch.device("cpu"))


def curve(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(steps, smoothed per-agent return) of a run, on its own iteration grid."""
    from core.training.logging import read_metrics

    m = read_metrics(run_dir / "metrics.csv")
    steps, ret = np.array(m["global_step"]), np.array(m["rollout/ep_return_mean"])
    ok = ~np.isnan(ret)
    steps, ret = steps[ok], ret[ok]
    k = min(SMOOTH, len(ret))
    smooth = np.convolve(ret, np.ones(k) / k, mode="valid")
    return steps[k - 1:], smooth


def final_return(run_dir: Path) -> float:
    from core.training.logging import read_metrics

    ret = np.array(read_metrics(run_dir / "metrics.csv")["rollout/ep_return_mean"])
    ret = ret[~np.isnan(ret)]
    return float(ret[-FINAL_ITERS:].mean())


def main(argv=None, prog=None) -> int:
    from experiments import ma_maddpg

    argv = list(argv) if argv is not None else sys.argv[1:]
    p = parser(prog, __doc__ + "\n" + (ma_maddpg.__doc__ or ""))
    p.add_argument("--suite", choices=("onpolicy", "maddpg"), default="onpolicy",
                   help="onpolicy: ippo/mappo/dapo-ma/maddpg (issue #5); maddpg: DAPO on MADDPG (issue #47)")
    p.add_argument("--steps", type=positive_int, default=150_000, help="env steps per run")
    p.add_argument("--seeds", type=positive_int, default=5, help="seeds 1..N")
    p.add_argument("--jobs", type=positive_int, default=2, help="runs in parallel (processes)")
    p.add_argument("--runs-dir", type=caller_path, default=None, help="default: runs/ma_benchmark[_maddpg]")
    p.add_argument("--out", type=caller_path, default=None,
                   help="default: experiments/results/ma (onpolicy) or experiments/results/ma_maddpg")
    p.add_argument("--actions", nargs="+", choices=("discrete", "continuous"), default=["discrete"],
                   help="maddpg suite: action types")
    p.add_argument("--variants", nargs="+", choices=ma_maddpg.VARIANTS, default=list(ma_maddpg.VARIANTS[:4]),
                   help="maddpg suite: recipe files of experiments/recipes/ma")
    p.add_argument("--report-only", action="store_true", help="maddpg suite: rebuild the report from finished runs")
    args = p.parse_args(argv)
    if args.suite == "maddpg":
        args.runs_dir = args.runs_dir or (Path("runs/ma_maddpg").resolve())
        args.out = args.out or ROOT / "experiments" / "results" / "ma_maddpg"
        args.argv = [a for i, a in enumerate(argv) if a != "--report-only" and not (a == "--suite" or (
            a == "maddpg" and i > 0 and argv[i - 1] == "--suite"))]
        return ma_maddpg.main(args)
    args.runs_dir = args.runs_dir or Path("runs/ma_benchmark").resolve()
    args.out = args.out or ROOT / "experiments" / "results" / "ma"
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    jobs = [(a, s) for s in range(1, args.seeds + 1) for a in ALGOS]
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, a, s, args.steps, str(args.runs_dir / f"{a}__s{s}")) for a, s in jobs]
        for f in futures:
            print("done", f.result(), flush=True)
    random_by_seed = [float(np.mean(random_returns(s, 40))) for s in range(1, args.seeds + 1)]
    report(args, random_by_seed, time.time() - t0)


def report(args, random_by_seed: list[float], wall: float) -> None:
    rows, dirs = [], {a: [args.runs_dir / f"{a}__s{s}" for s in range(1, args.seeds + 1)] for a in ALGOS}
    finals = {a: np.array([final_return(d) for d in dirs[a]]) for a in ALGOS}
    r_random = float(np.mean(random_by_seed))
    mappo_final = float(finals["mappo"].mean())
    thresholds = {"90% of MAPPO's gain": r_random + 0.9 * (mappo_final - r_random), "MAPPO final": mappo_final}
    for a in ALGOS:
        for s, d in enumerate(dirs[a], start=1):
            summary = json.loads((d / "summary.json").read_text())
            steps, smooth = curve(d)
            rows.append({"algo": a, "seed": s, "final_return": round(finals[a][s - 1], 3),
                         "eval_return": round(summary["eval_return_mean"], 3),
                         **{f"steps_to[{k}]": steps_to_threshold(steps, smooth, v) for k, v in thresholds.items()},
                         "wall_time_s": summary["wall_time_s"], "sps": summary["sps"],
                         "health_events": sum(summary["health_events"].values())})
    for s, r in enumerate(random_by_seed, start=1):
        rows.append({"algo": "random", "seed": s, "final_return": round(r, 3), "eval_return": round(r, 3)})
    write_rows(args.out / "results.csv", rows)
    write_markdown(args, rows, finals, random_by_seed, thresholds, dirs, wall)
    plot(args, dirs, r_random, thresholds)


def write_markdown(args, rows, finals, random_by_seed, thresholds, dirs, wall) -> None:
    lines = [
        f"# simple_spread_v3 multi-agent benchmark ({args.steps:,} env steps, {args.seeds} seeds)", "",
        f"Env: mpe2 `{ENV}` `{ENV_KWARGS}` (discrete actions). Return = mpe2 rewards summed over the 25 steps "
        "of an episode per agent, averaged over the 3 agents. Final return = mean training-episode return over "
        f"the last {FINAL_ITERS} iterations; eval = 20 deterministic episodes. IQM and its 95% bootstrap CI "
        "(5000 resamples of seeds) over seeds; std = sample std (ddof=1) over seeds. Env steps = joint steps summed over env copies.", "",
        "| algo | final return per seed | mean +- sample std | IQM [95% CI] | eval mean | "
        + " | ".join(f"steps to {k} (median; reached)" for k in thresholds) + " |",
        "|---|---|---|---|---|" + "---|" * len(thresholds),
    ]
    for a in (*ALGOS, "random"):
        x = np.array(random_by_seed) if a == "random" else finals[a]
        ev = [r["eval_return"] for r in rows if r["algo"] == a]
        lo, hi = stratified_bootstrap_ci({"simple_spread": x}, iqm, reps=5000)
        cells = []
        for k in thresholds:
            hits = np.array([r.get(f"steps_to[{k}]", math.nan) for r in rows if r["algo"] == a], dtype=float)
            reached = hits[~np.isnan(hits)]
            cells.append("-" if a == "random" else
                         f"{np.median(reached):,.0f}; {len(reached)}/{len(hits)}" if len(reached) else f"never; 0/{len(hits)}")
        lines.append(f"| {a} | {', '.join(f'{v:.2f}' for v in x)} | {mean_pm_std(x, 2)} | "
                     f"{iqm(x):.2f} [{lo:.2f}, {hi:.2f}] | {np.mean(ev):.2f} | " + " | ".join(cells) + " |")
    for k in thresholds:
        med = {a: np.nanmedian([r.get(f"steps_to[{k}]", math.nan) for r in rows if r["algo"] == a]) for a in ALGOS}
        ratio = med["dapo-ma"] / med["mappo"] if med["mappo"] > 0 else math.nan
        lines.append(f"\nSteps to {k}: dapo-ma / mappo median ratio = {ratio:.2f} (target <= 0.60; NaN: not reached)")
    lines += ["", "Thresholds: " + "; ".join(f"{k} = {v:.2f}" for k, v in thresholds.items())
              + " (per-seed steps at which the 10-iteration moving average first reaches the threshold).", "",
              f"Command: `python -m experiments.ma_benchmark --steps {args.steps} --seeds {args.seeds} --jobs {args.jobs}`"
              f"; machine: {platform.processor() or platform.machine()}, {_cpus()} CPU cores shared with other work, "
              f"no GPU; total wall time of this invocation {wall / 60:.1f} min (finished runs are skipped on re-runs).",
              "", "![learning curves](learning_curves.png)"]
    write_results_md(args.out / "results.md", "\n".join(lines))


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


def plot(args, dirs, r_random, thresholds) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for a in ALGOS:
        grid = np.arange(GRID, args.steps + 1, GRID)
        curves = np.stack([np.interp(grid, *curve(d), left=np.nan) for d in dirs[a]])
        with warnings.catch_warnings():  # grid points before any run's first smoothed value are all-NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, lo, hi = np.nanmean(curves, 0), np.nanmin(curves, 0), np.nanmax(curves, 0)
        ax.plot(grid, mean, lw=2, label=a)
        ax.fill_between(grid, lo, hi, alpha=0.15)
    ax.axhline(r_random, color="k", ls=":", label="random")
    ax.axhline(thresholds["MAPPO final"], color="grey", ls="--", lw=1, label="MAPPO final")
    finish_figure(fig, ax, "environment steps", "episode return per agent",
                  f"simple_spread_v3 (N=3), mean and min-max over {args.seeds} seeds", args.out / "learning_curves.png",
                  loc="lower right")


if __name__ == "__main__":
    script_main(main)
