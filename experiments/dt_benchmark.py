"""Decision Transformer benchmark (issue #6): DT vs DAPO-DT on the same Atari datasets and budgets.

For every ``ENV=DATASET`` pair, variant, dataset fraction and seed, one ``dapo run`` runs in its own
process under ``RUNS/<env>/<variant>/frac<f>/s<seed>`` (resumable: finished runs are skipped, interrupted
ones resumed).  Variants are ``dt``, ``dapo-dt`` and DAPO-DT ablations (``VARIANTS``).  The report gives,
per env:

- the final evaluation score (whole games, mean over seeds +- sample std (ddof=1), human-normalised);
- score versus gradient steps (mean +- sample std over seeds, one PNG per env) and the gradient steps each
  DAPO-DT variant needs to reach DT's final score (the source claims 28% fewer: ratio <= 0.72);
- score versus dataset size (the ``--fractions`` of the dataset's steps).

    python -m experiments.dt_benchmark --data ALE/Pong-v5=pong/mixed-v0 --seeds 1 2 3 --grad-steps 2000
    python -m experiments.dt_benchmark --data ALE/Pong-v5=pong/mixed-v0 --fractions 0.25 0.5 1 --seeds 1 2 3
    python -m experiments.dt_benchmark --data ALE/Pong-v5=pong/mixed-v0 --variants dt dapo-dt dapo-dt-no-weighting
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from experiments.notes import write_results_md
from experiments.result_rows import write_rows
from experiments.stats import mean_pm_std, sample_std, steps_to_threshold
from experiments.sweep import ROOT, caller_path, failures, parser, positive_int, run_cli, run_jobs, script_main, seed_int
from core.run.plotting import finish_figure

VARIANTS = {
    "dt": ["--algo", "dt"],
    "dapo-dt": ["--algo", "dapo-dt"],
    # ablations: DAPO-DT with one mechanism removed or restored (docs/algorithms.md)
    "dapo-dt-no-weighting": ["--algo", "dapo-dt", "--no-advantage-weighting"],  # FiLM and value head only
    "dapo-dt-no-modulation": ["--algo", "dapo-dt", "--no-advantage-modulation"],  # weighted loss only
    "dapo-dt-value-trains-encoder": ["--algo", "dapo-dt", "--value-trains-encoder"],  # the pre-fix value head
    "dapo-dt-ev-gated": ["--algo", "dapo-dt", "--ev-gated-weights"],  # weights trust the critic by its EV
    "dapo-dt-gamma0.99": ["--algo", "dapo-dt", "--adv-gamma", "0.99"],  # A = discounted return - V
    "dapo-dt-value-cnn-gamma0.99": ["--algo", "dapo-dt", "--adv-gamma", "0.99", "--separate-value-encoder"],
}
DEFAULT_VARIANTS = ("dt", "dapo-dt")
RANDOM_LEVEL = 0.05
"""Human-normalised score below which DT counts as playing at random level: the steps-to-DT's-score ratio
is then not reported (on Pong 0.05 is -19.2 against random play's -20.7)."""


def run_path(runs: Path, env: str, variant: str, frac: float, seed: int) -> Path:
    return runs / env.replace("/", "-") / variant / f"frac{frac:g}" / f"s{seed}"


def dataset_steps(name: str) -> int:
    from dapo_dt.data import info

    return info(name)["steps"]


def curve(run: Path) -> tuple[np.ndarray, np.ndarray]:
    """(gradient steps, eval score) rows of a run's metrics.csv."""
    from core.training.logging import read_metrics

    m = read_metrics(run / "metrics.csv")
    steps, score = np.array(m["global_step"]), np.array(m.get("eval/return_mean", [np.nan] * len(m["global_step"])))
    ok = ~np.isnan(score)
    return steps[ok], score[ok]


def report(out: Path, runs: Path, data: dict[str, str], seeds, fractions, command: str,
           variants=DEFAULT_VARIANTS) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import platform

    import torch

    from dapo_dt.data import info
    from dapo_dt.trainer import human_normalised

    machine = f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}, {platform.python_version()}"
    rows, lines = [], [f"# DT vs DAPO-DT\n\nCommand: `{command}`\n\nMachine: {machine}. Scores are whole games "
                       "(raw, and human-normalised with Mnih et al. 2015's random/human scores); the final score is "
                       "the evaluation after the last gradient step.\n"]
    for env, name in data.items():
        ds = info(name)
        lines += [f"\n## {env} (dataset `{name}`)\n",
                  f"Dataset: {ds['episodes']} games, {ds['steps']} steps, return mean {ds['return_mean']:.2f} +- sample std "
                  f"{ds['return_std']:.2f}, min/q25/median/q75/max {ds['return_min_q25_median_q75_max']}, behaviour "
                  f"policies {ds['policies']} with epsilon {ds['epsilon']}.\n",
                  "| variant | data fraction | seeds | final score (mean +- sample std) | human-normalised | per seed |",
                  "|---|---|---|---|---|---|"]
        fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
        finals: dict[tuple[str, float], list[float]] = {}
        mean_curves, curve_rows = {}, []
        for variant in variants:
            for frac in fractions:
                done = [run_path(runs, env, variant, frac, s) for s in seeds]
                done = [d for d in done if (d / "summary.json").exists()]
                if not done:
                    continue
                sums = [json.loads((d / "summary.json").read_text()) for d in done]
                finals[variant, frac] = [s["eval_return_mean"] for s in sums]
                for d, s in zip(done, sums):
                    rows.append({"env": env, "variant": variant, "fraction": frac, "seed": s["seed"],
                                 "dataset_steps": s["dataset_steps"], "grad_steps": s["grad_steps"],
                                 "online_env_steps": s["online_env_steps"], "eval_return_mean": s["eval_return_mean"],
                                 "human_normalised": s["human_normalised"], "wall_time_s": s["wall_time_s"]})
                v = np.array(finals[variant, frac])
                hn = np.mean([s["human_normalised"] for s in sums])
                per_seed = ", ".join(f"{x:+.1f}" for x in v)
                lines.append(f"| {variant} | {frac:g} | {len(v)} | {mean_pm_std(v, 2)} | {hn:.3f} | {per_seed} |")
                if frac == max(fractions):
                    curves = [curve(d) for d in done]
                    steps = np.array(sorted(set.intersection(*(set(c[0].tolist()) for c in curves))))
                    ys = np.stack([[y for x, y in zip(*c) if x in set(steps.tolist())] for c in curves])
                    mean_curves[variant] = (steps, ys.mean(0))
                    seeds_done = [s["seed"] for s in sums]
                    curve_rows.append((variant, seeds_done, steps, ys))
                    ax.plot(steps, ys.mean(0), label=variant)
                    band = ys.std(0, ddof=1) if len(ys) > 1 else np.zeros(ys.shape[1])  # sample std; one seed: no band
                    ax.fill_between(steps, ys.mean(0) - band, ys.mean(0) + band, alpha=0.2)
        if curve_rows:
            grid = sorted(set.union(*(set(r[2].tolist()) for r in curve_rows)))
            lines += ["", "Score versus gradient steps (mean over the seeds listed):", "",
                      "| variant | seeds | " + " | ".join(f"step {x:g}" for x in grid) + " |",
                      "|---|---|" + "---|" * len(grid)]
            for variant, seeds_done, steps, ys in curve_rows:
                at = dict(zip(steps.tolist(), ys.mean(0)))
                lines.append(f"| {variant} | {', '.join(map(str, seeds_done))} | "
                             + " | ".join(f"{at[x]:+.2f}" if x in at else "-" for x in grid) + " |")
        seeds_of = {r[0]: r[1] for r in curve_rows}
        challengers = [v for v in variants if v != "dt" and v in mean_curves]
        if "dt" in mean_curves and challengers:
            dt_final = mean_curves["dt"][1][-1]
            dt_normalised = human_normalised(env, dt_final)
            if dt_normalised < RANDOM_LEVEL:
                lines.append(f"\nGradient steps to DT's final mean score ({dt_final:.2f}): not measured, DT ends at "
                             f"the random-play level (human-normalised {dt_normalised:.3f} < {RANDOM_LEVEL}), where "
                             "reaching its score says nothing about sample efficiency.")
            else:
                dt_steps = steps_to_threshold(*mean_curves["dt"], dt_final)
                reached = []
                for v in challengers:
                    name, v_steps = ("DAPO-DT" if v == "dapo-dt" else v), steps_to_threshold(*mean_curves[v], dt_final)
                    other = "" if seeds_of[v] == seeds_of["dt"] else f", seeds {seeds_of[v]}, not DT's"
                    reached.append(f"{name} {v_steps:.0f} (ratio {v_steps / dt_steps:.2f}{other})" if np.isfinite(v_steps)
                                   else f"{name} never within {mean_curves[v][0][-1]:.0f} (no ratio{other})")
                lines.append(f"\nGradient steps to DT's final mean score ({dt_final:.2f}): DT {dt_steps:.0f}, "
                             f"{', '.join(reached)}; the source claims a DAPO-DT ratio <= 0.72. Evaluations are every "
                             "`--eval-every` steps, so steps are resolved to that grid.")
        if len(fractions) > 1:
            fig2, ax2 = plt.subplots(figsize=(5, 3.5), dpi=120)
            for variant in variants:
                pts = [(f * ds["steps"], np.mean(finals[variant, f]), np.nan_to_num(sample_std(finals[variant, f])))
                       for f in sorted(fractions) if (variant, f) in finals]
                if pts:
                    x, y, e = map(np.array, zip(*pts))
                    ax2.errorbar(x, y, yerr=e, marker="o", capsize=3, label=variant)
            finish_figure(fig2, ax2, "dataset steps used", "final evaluation score", f"Score vs dataset size, {env}",
                          out / f"{env.replace('/', '-')}_score_vs_dataset_size.png")
        finish_figure(fig, ax, "gradient steps", "evaluation score (whole games)",
                      f"{' vs '.join(variants)} on {env}", out / f"{env.replace('/', '-')}_score_vs_grad_steps.png")
    write_rows(out / "results.csv", rows)
    write_results_md(out / "results.md", "\n".join(lines))


def main(argv=None, prog=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = parser(prog, __doc__)
    p.add_argument("--data", nargs="+", required=True, metavar="ENV=DATASET",
                   help="Atari env and the Minari dataset made for it by 'dapo dataset collect'")
    p.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS), choices=list(VARIANTS),
                   help="dt, dapo-dt and DAPO-DT ablations (each one 'dapo run' per env, fraction and seed)")
    p.add_argument("--seeds", nargs="+", type=seed_int, default=[1, 2, 3])
    p.add_argument("--fractions", nargs="+", type=float, default=[1.0], help="fractions of the dataset's steps")
    p.add_argument("--grad-steps", type=positive_int, default=2000, help="offline gradient steps per run")
    p.add_argument("--eval-every", type=positive_int, default=250, help="gradient steps between evaluations")
    p.add_argument("--eval-episodes", type=positive_int, default=8, help="whole games per evaluation")
    p.add_argument("--online-steps", type=int, default=0, help="online fine-tuning env steps after offline training")
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="further 'dapo run' flags for every run")
    p.add_argument("--jobs", type=positive_int, default=2, help="runs in parallel")
    p.add_argument("--out", type=caller_path, default=ROOT / "experiments" / "results" / "dt")
    p.add_argument("--runs-dir", type=caller_path, default=ROOT / "runs" / "dt_benchmark")
    p.add_argument("--report-only", action="store_true",
                   help="rebuild the tables and plots from finished runs (notes below the results.md marker are kept)")
    args = p.parse_args(argv)
    try:
        data = dict(pair.split("=", 1) for pair in args.data)
    except ValueError:
        p.error("--data takes ENV=DATASET pairs, e.g. ALE/Pong-v5=pong/mixed-v0")
    if any(not 0 < f <= 1 for f in args.fractions):
        p.error(f"--fractions must be in (0, 1], got {args.fractions}")
    if args.online_steps < 0:
        p.error(f"--online-steps must be >= 0, got {args.online_steps}")
    for name in data.values():
        dataset_steps(name)  # an unknown dataset: one line before any run starts
    statuses = []
    if not args.report_only:
        jobs = []
        for env, name in data.items():
            total = dataset_steps(name)
            for frac in args.fractions:
                for seed in args.seeds:
                    for variant in args.variants:
                        flags = [*VARIANTS[variant], "--env", env, "--dataset", name, "--seed", str(seed),
                                 "--grad-steps", str(args.grad_steps), "--eval-every", str(args.eval_every),
                                 "--eval-episodes", str(args.eval_episodes), "--online-steps", str(args.online_steps),
                                 "--dataset-steps", str(max(1, int(frac * total))), "--no-progress", *args.extra]
                        jobs.append((run_path(args.runs_dir, env, variant, frac, seed), flags))
        statuses = run_jobs(jobs, run_cli, args.jobs, args.runs_dir)
    if statuses and all(s.startswith("FAILED") for s in statuses):
        return failures(statuses)
    args.out.mkdir(parents=True, exist_ok=True)
    # the sweep that made the runs
    command = "python -m experiments.dt_benchmark " + " ".join(a for a in argv if a != "--report-only")
    report(args.out, args.runs_dir, data, args.seeds, args.fractions, command, args.variants)
    print((args.out / "results.md").read_text())
    return failures(statuses)


if __name__ == "__main__":
    script_main(main)
