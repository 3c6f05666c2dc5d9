"""DAPO on MADDPG against MADDPG on simple_spread_v3 (issue #47): `python -m experiments.ma_benchmark --suite maddpg`.

Task: mpe2 ``simple_spread_v3``, ``N=3 local_ratio=0.5 max_cycles=25``, discrete and continuous actions.  Variants are
recipe files in experiments/recipes/ma/ (maddpg, dapo-maddpg, each DAPO ingredient alone, and mappo / dapo-ma as
on-policy references); ``random`` and ``greedy`` (nearest free landmark) are reference policies.  Every run goes to
``RUNS/<actions>/<variant>/s<seed>`` (resumed if interrupted, skipped if finished), then its final policy plays 20
evaluation episodes (``eval.json``: return, landmarks covered at the end, collisions).  Measures per run:

- ``final_return``: mean of the per-update training return over the last 10% of the budget (mpe2 units: per-agent
  return over 25 steps);
- ``steps_to_threshold``: env steps until the 10-update moving mean first reaches 90% of MADDPG's final gain over
  random (MADDPG's final: the mean of its seeds' final_return), per action type;
- the convergence speed-up: median steps of a variant / median steps of MADDPG, with a bootstrap 95% CI (a seed that
  never reaches the threshold counts as the budget).
"""
from __future__ import annotations

import json
import math
import platform
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from experiments import ma_spread as ms
from experiments.notes import write_results_md
from experiments.result_rows import write_rows
from experiments.stats import iqm, steps_to_threshold, stratified_bootstrap_ci
from experiments.sweep import ROOT
from core.run.plotting import finish_figure

RECIPES = ROOT / "experiments" / "recipes" / "ma"
VARIANTS = ("maddpg", "dapo-maddpg", "dapo-maddpg-weights", "dapo-maddpg-clips", "mappo",
            "dapo-ma")
REFERENCES = ("random", "greedy")
ENV, KWARGS = "simple_spread_v3", {"N": 3, "local_ratio": 0.5, "max_cycles": 25}
EVAL_EPISODES, SMOOTH, FINAL_SHARE = 20, 10, 0.1


def env_kwargs(actions: str) -> dict:
    return {**KWARGS, "continuous_actions": actions == "continuous"}


def run_one(variant: str, actions: str, seed: int, steps: int, run_dir: str) -> str:
    """Train (or resume) one run, then evaluate its final policy into eval.json; returns the directory."""
    import torch

    import dapo_ma

    torch.set_num_threads(1)
    path = Path(run_dir)
    if not (path / "summary.json").exists():
        resume = (path / "checkpoint.pt").exists()
        options = {} if resume else dict(recipe=(str(RECIPES / f"{variant}.yaml"),), env=ENV,
                                         env_kwargs=env_kwargs(actions), seed=seed, total_steps=steps,
                                         run_dir=run_dir, eval_episodes=0)
        dapo_ma.train(resume=path if resume else None, progress=False, tensorboard=False, **options)
    if not (path / "eval.json").exists():
        agent = dapo_ma.load(path)
        stats = ms.evaluate(agent.config, ms.trained_policy(agent), EVAL_EPISODES, seed + 10_000)
        (path / "eval.json").write_text(json.dumps(stats))
    return run_dir


def reference(name: str, actions: str, seed: int) -> dict:
    from dapo_ma.config import resolve

    cfg = resolve({"algo": "mappo", "env": ENV, "env_kwargs": env_kwargs(actions)})
    return ms.evaluate(cfg, ms.reference_policy(name, actions == "continuous", KWARGS["N"], seed), EVAL_EPISODES,
                       seed + 10_000)


def curve(run_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, per-update return, its SMOOTH-update moving mean aligned to steps[SMOOTH-1:])."""
    from core.training.logging import read_metrics

    m = read_metrics(run_dir / "metrics.csv")
    steps, ret = np.array(m["global_step"]), np.array(m["rollout/ep_return_mean"])
    ok = ~np.isnan(ret)
    steps, ret = steps[ok], ret[ok]
    k = min(SMOOTH, len(ret))
    return steps, ret, np.convolve(ret, np.ones(k) / k, mode="valid")


def final_return(run_dir: Path, budget: int) -> float:
    steps, ret, _ = curve(run_dir)
    return float(ret[steps > (1 - FINAL_SHARE) * budget].mean())


def run_dirs(runs: Path, actions: str, variant: str, seeds) -> list[Path]:
    return [runs / actions / variant / f"s{s}" for s in seeds]


def sweep(args) -> None:
    jobs = [(v, a, s, args.steps, str(run_dirs(args.runs_dir, a, v, [s])[0]))
            for a in args.actions for s in args.seed_list for v in args.variants]
    print(f"{len(jobs)} runs, {args.jobs} at a time, into {args.runs_dir}", flush=True)
    with ProcessPoolExecutor(args.jobs) as pool:
        for f in [pool.submit(run_one, *j) for j in jobs]:
            print("done", f.result(), flush=True)


def report(args) -> None:
    rows, lines = [], [f"# DAPO on MADDPG, simple_spread_v3 ({args.steps:,} env steps per run)", ""]
    for actions in args.actions:
        refs = {n: [reference(n, actions, s) for s in args.seed_list] for n in REFERENCES}
        r_random = float(np.mean([r["return"] for r in refs["random"]]))
        have = {v: [d for d in run_dirs(args.runs_dir, actions, v, args.seed_list) if (d / "eval.json").exists()]
                for v in args.variants}
        finals = {v: np.array([final_return(d, args.steps) for d in ds]) for v, ds in have.items()}
        if not len(finals.get("maddpg", [])):
            raise SystemExit(f"no finished maddpg runs for {actions} actions under {args.runs_dir}")
        threshold = ms.final_gain_threshold(r_random, finals["maddpg"])
        reach = {}
        for v, ds in have.items():
            reach[v] = []
            for d, f in zip(ds, finals[v]):
                steps, _, smooth = curve(d)
                s = steps_to_threshold(steps[len(steps) - len(smooth):], smooth, threshold)
                reach[v].append(s)
                summary, ev = json.loads((d / "summary.json").read_text()), json.loads((d / "eval.json").read_text())
                rows.append({"algo": v, "actions": actions, "seed": int(d.name[1:]), "total_steps": summary["total_steps"],
                             "final_return": round(f, 3), "landmarks_covered": round(ev["landmarks_covered"], 4),
                             "collisions": round(ev["collisions"], 3), "steps_to_threshold": s,
                             "eval_return": round(ev["return"], 3), "wall_time_s": summary["wall_time_s"],
                             "sps": summary["sps"]})
        for n, stats in refs.items():
            rows += [{"algo": n, "actions": actions, "seed": s, "total_steps": 0, "final_return": round(r["return"], 3),
                      "landmarks_covered": round(r["landmarks_covered"], 4), "collisions": round(r["collisions"], 3),
                      "eval_return": round(r["return"], 3)} for s, r in zip(args.seed_list, stats)]
        lines += table(actions, rows, finals, reach, refs, threshold, r_random)
    write_rows(args.out / "results.csv", rows)
    run_hours = sum(r.get("wall_time_s", 0) for r in rows) / 3600
    lines += ["", f"Command: `python -m experiments.ma_benchmark --suite maddpg {' '.join(args.argv)}`; machine: "
              f"{platform.processor() or platform.machine()}, 2 CPU cores shared with other work, no GPU; the runs "
              f"took {run_hours:.1f} CPU hours in all (finished runs are skipped on re-runs). Spreads are sample std "
              "(ddof=1); IQM with a stratified-bootstrap 95% CI over seeds; speed-up CIs resample seeds within each "
              "variant (5000 draws; a seed that never reached the threshold counts as the budget).",
              "", *[f"![{a}](curves_{a}.png)" for a in args.actions]]
    write_results_md(args.out / "results.md", "\n".join(lines))
    for actions in args.actions:
        plot(args, actions)


def table(actions, rows, finals, reach, refs, threshold, r_random) -> list[str]:
    lines = [f"## {actions} actions", "", f"Threshold (90% of MADDPG's final gain over random, {r_random:.2f}): "
             f"{threshold:.2f}.", "", "| variant | seeds | final return, mean +- std | IQM [95% CI] | landmarks covered "
             "| collisions / episode | steps to threshold (median; reached) | speed-up vs maddpg [95% CI] | SPS |",
             "|---|---|---|---|---|---|---|---|---|"]
    base = np.array(reach.get("maddpg", []), float)
    for v, x in finals.items():
        if not len(x):
            continue
        mine = [r for r in rows if r["algo"] == v and r["actions"] == actions]
        hits = np.array(reach[v], float)
        lo, hi = stratified_bootstrap_ci({"spread": x}, iqm, reps=5000) if len(x) > 1 else (math.nan, math.nan)
        budget = max(r["total_steps"] for r in rows)  # a seed that never reached counts as the budget
        ratio = ms.ratio_of_medians_ci(hits, base, budget=budget) if v != "maddpg" and len(base) else None
        reached = hits[~np.isnan(hits)]
        lines.append(f"| {v} | {len(x)} | {x.mean():.2f} +- {x.std(ddof=1) if len(x) > 1 else math.nan:.2f} | "
                     f"{iqm(x):.2f} [{lo:.2f}, {hi:.2f}] | {np.mean([r['landmarks_covered'] for r in mine]):.2f} | "
                     f"{np.mean([r['collisions'] for r in mine]):.2f} | "
                     + (f"{np.median(reached):,.0f}; {len(reached)}/{len(hits)}" if len(reached) else f"never; 0/{len(hits)}")
                     + f" | {'-' if ratio is None else f'{ratio[0]:.2f} [{ratio[1]:.2f}, {ratio[2]:.2f}]'} | "
                     f"{np.mean([r['sps'] for r in mine]):.0f} |")
    for n, stats in refs.items():
        ret = np.array([r["return"] for r in stats])
        lines.append(f"| {n} (policy) | {len(ret)} | {ret.mean():.2f} +- {ret.std(ddof=1):.2f} | | "
                     f"{np.mean([r['landmarks_covered'] for r in stats]):.2f} | "
                     f"{np.mean([r['collisions'] for r in stats]):.2f} | | | |")
    return lines + [""]


def plot(args, actions: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    grid = np.linspace(0, args.steps, 100)
    for v in args.variants:
        ds = [d for d in run_dirs(args.runs_dir, actions, v, args.seed_list) if (d / "eval.json").exists()]
        if not ds:
            continue
        curves = []
        for d in ds:
            steps, _, smooth = curve(d)
            curves.append(np.interp(grid, steps[len(steps) - len(smooth):], smooth, left=np.nan))
        with warnings.catch_warnings():  # grid points before any run's first smoothed value are all-NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(np.stack(curves), 0)
        ax.plot(grid, mean, lw=2, label=f"{v} ({len(ds)})")
    finish_figure(fig, ax, "environment steps", "episode return per agent (10-update mean)",
                  f"simple_spread_v3 (N=3), {actions} actions, mean over seeds", args.out / f"curves_{actions}.png",
                  loc="lower right")


def main(args) -> int:
    """Run the sweep (unless --report-only) and write results.csv, results.md and the curves."""
    args.seed_list = list(range(1, args.seeds + 1))
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        sweep(args)
    report(args)
    return 0
