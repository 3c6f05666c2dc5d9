"""Tables and learning curves for ``mujoco_benchmark.py`` (results.csv, curves.csv, results.md, curves_<env>.png).

The report covers the runs finished here merged with the rows already committed in the output folder
(:mod:`experiments.result_rows`), so a sweep that adds seeds on a fresh machine extends the table."""
from __future__ import annotations

import csv
import json
import math
import re
import time
import warnings
from pathlib import Path
from typing import Optional

import numpy as np

from experiments.bench_throughput import cpu_name, machine
from experiments.notes import write_results_md
from experiments.result_rows import check_budget, merge_rows, read_rows, write_rows
from experiments.stats import iqm, mean_pm_std, probability_of_improvement, sample_std, stratified_bootstrap_ci
from core.run.plotting import finish_figure

SOURCE_CLAIMS = {"HalfCheetah": (2856, 3241, 3872), "Walker2d": (1842, 2103, 2547), "Ant": (1256, 1428, 1893),
                 "Humanoid": (832, 905, 1214)}       # PPO, GRPO, DAPO "average return, 10 runs" (the source's claim)
CLEANRL_PPO_1M = {"HalfCheetah": 2906, "Walker2d": 2891, "Humanoid": 742}  # CleanRL's published v4 numbers
RUN_KEY = ("env", "variant", "seed")
CURVE_POINTS = 101  # learning-curve grid committed in curves.csv (0 .. total steps)
RECIPES = Path(__file__).resolve().parent / "recipes" / "mujoco"  # the variants' recipe files


def column_recipes(out: Path, variants) -> dict[str, Optional[str]]:
    """``{column label: the recipe file (under experiments/recipes/mujoco/) its runs used}``: the folder's record
    (variants.yaml) where it has the label, else the benchmark's suites (the first suite naming the label)."""
    import yaml

    from experiments.mujoco_benchmark import load_suites

    record = yaml.safe_load((out / "variants.yaml").read_text()) if (out / "variants.yaml").exists() else {}
    suites = list(load_suites().values())
    return {v: record[v]["recipe"] if v in record else next((t[v] for t in suites if v in t), None) for v in variants}


def column_label(label: str, recipe: Optional[str]) -> str:
    """A column's header.  A column named after an algorithm (``ppo``, ``grpo``, ``dapo``) that did not run that
    algorithm's own settings (what ``--algo NAME`` gives) names the recipe it ran with: its recipe file, or, where
    that file carries the label's name, the shipped recipes it is built on (``dapo (dapo-mujoco recipe)``).  Other
    labels are recipe files' names already."""
    import dataclasses

    import yaml

    from core.config.options import ALGOS
    from core.run.presets import resolve

    if label not in ALGOS or recipe is None:
        return label
    path = RECIPES / f"{recipe}.yaml"

    def config(options):
        return {k: v for k, v in dataclasses.asdict(resolve({**options, "env": "Walker2d-v5"}, "continuous")).items()
                if k != "recipe"}

    if config({"recipe": (str(path),)}) == config({"algo": label}):
        return label
    if recipe != label:
        return f"{label} ({recipe} recipe)"
    base = yaml.safe_load(path.read_text()).get("base") or []
    shipped = [b for b in ([base] if isinstance(base, str) else base) if not (RECIPES / f"{b}.yaml").exists()]
    return f"{label} ({', '.join(shipped) or recipe} recipe)"


def _summaries(runs: Path, envs, variants, seeds) -> list[dict]:
    rows, cpu = [], cpu_name()
    for env in envs:
        for v in variants:
            for s in seeds:
                f = runs / env / v / f"s{s}" / "summary.json"
                if f.exists():
                    d = json.loads(f.read_text())
                    rows.append({"env": env, "variant": v, "seed": s, "total_steps": d["total_steps"],
                                 "final_return_mean": d["final_return_mean"], "eval_return_mean": d["eval_return_mean"],
                                 "wall_time_s": round(d["wall_time_s"], 1), "sps": round(d["sps"], 1), "cpu": cpu})
    return rows


def _curve(run: Path, grid: np.ndarray) -> np.ndarray:
    with open(run / "metrics.csv", newline="") as f:
        rows = [(float(r["global_step"]), r["rollout/ep_return_mean"]) for r in csv.DictReader(f)]
    pts = [(s, float(v)) for s, v in rows if v not in ("", "nan")]
    if not pts:
        return np.full_like(grid, np.nan)
    steps, vals = map(np.asarray, zip(*pts))
    k = min(10, len(vals))
    smooth = np.convolve(vals, np.ones(k) / k, mode="valid")
    return np.interp(grid, steps[k - 1:], smooth, left=np.nan, right=smooth[-1])


def _local_curves(runs: Path, rows: list[dict], total_steps: int) -> list[dict]:
    """curves.csv rows (one per run and grid step) for the runs whose metrics.csv is here."""
    grid = np.linspace(0, total_steps, CURVE_POINTS)
    out = []
    for r in rows:
        run = runs / r["env"] / r["variant"] / f"s{r['seed']}"
        if (run / "metrics.csv").exists():
            out += [{**{k: r[k] for k in RUN_KEY}, "step": int(x), "ep_return": round(float(y), 1)}
                    for x, y in zip(grid, _curve(run, grid))]
    return out


def _plot(out: Path, curve_rows: list[dict], rows: list[dict], env: str, variants, total_steps: int) -> None:
    """curves_<env>.png: mean +- sample std (ddof=1) over seeds per variant, over the runs that have a stored curve; a run
    committed before curves.csv existed has none, and the legend then says how many of the variant's runs
    are drawn ("n=5 of 10")."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points: dict[tuple, list] = {}
    for c in curve_rows:
        if c["env"] == env:
            points.setdefault((c["variant"], c["seed"]), []).append((c["step"], c["ep_return"]))
    in_table = {v: sum(r["env"] == env and r["variant"] == v for r in rows) for v in variants}
    missing = [f"{r['variant']}/s{r['seed']}" for r in rows
               if r["env"] == env and (r["variant"], r["seed"]) not in points]
    if missing:
        print(f"curves_{env}.png: no stored learning curve for {', '.join(missing)} (drawn without them)")
    grid = np.linspace(0, total_steps, CURVE_POINTS)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for v in variants:
        runs = [np.array(sorted(pts), dtype=float) for (cv, _), pts in points.items() if cv == v]
        if not runs:
            continue
        curves = np.array([np.interp(grid, r[:, 0], r[:, 1]) for r in runs])
        with warnings.catch_warnings():  # grid points before a run's first full window are all-NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, std = np.nanmean(curves, 0), np.nanstd(curves, 0, ddof=1)  # NaN (no band) where < 2 runs
        drawn = f"n={len(curves)}" + (f" of {in_table[v]}" if in_table[v] > len(curves) else "")
        ax.plot(grid, mean, label=f"{v} ({drawn})")
        ax.fill_between(grid, mean - std, mean + std, alpha=0.2)
    finish_figure(fig, ax, "environment steps", "episode return (10-update mean)",
                  f"{env}: mean +- sample std (ddof=1) over seeds", out / f"curves_{env}.png", fontsize=8)


def _scores(rows: list[dict], envs, variant: str) -> dict[str, list[float]]:
    """``{env: finite final returns of the variant's runs}`` (envs without any left out)."""
    out = {}
    for env in envs:
        x = [r["final_return_mean"] for r in rows if r["env"] == env and r["variant"] == variant]
        x = [a for a in x if not math.isnan(a)]
        if x:
            out[env] = x
    return out


def normalised_summary(rows: list[dict], envs, variants) -> tuple[list[str], dict[str, tuple]]:
    """Across envs: ``(envs used, {variant: (IQM, CI low, CI high, P(> first variant) or None, runs)})`` of min-max
    normalised returns (0 = the env's worst run in ``rows``, 1 = its best), over the envs that every variant has run
    on (so that every variant averages the same envs), with a stratified-bootstrap 95% CI."""
    per_variant = {v: _scores(rows, envs, v) for v in variants}
    bounds = {}
    for env in envs:
        pooled = [a for sv in per_variant.values() for a in sv.get(env, [])]
        if all(env in sv for sv in per_variant.values()) and max(pooled) > min(pooled):
            bounds[env] = (min(pooled), max(pooled))
    base, out = per_variant[variants[0]], {}
    for v in variants:
        sv = {e: [(a - bounds[e][0]) / (bounds[e][1] - bounds[e][0]) for a in x]
              for e, x in per_variant[v].items() if e in bounds}
        if sv:
            lo, hi = stratified_bootstrap_ci(sv, iqm, reps=2000)
            flat = [a for x in sv.values() for a in x]
            poi = None if v == variants[0] else probability_of_improvement(per_variant[v], base)
            out[v] = (iqm(flat), lo, hi, poi, len(flat))
    return list(bounds), out


def aggregate_table(rows: list[dict], envs, variants, labels: Optional[dict] = None) -> list[str]:
    """:func:`normalised_summary` as a markdown table: each variant's normalised IQM [95% CI] and its probability of
    improvement over the first.  ``labels``: a row's name for a variant (default: the variant)."""
    labels = labels or {}
    used, summary = normalised_summary(rows, envs, variants) if len(variants) >= 2 else ([], {})
    if not used:
        return []
    first = variants[0]
    md = ["", f"Across the envs every variant ran ({', '.join(used)}): IQM of min-max normalised returns "
          "(per env, 0 = the worst and 1 = the best run in this table) [95% stratified-bootstrap CI over runs], and P(variant > "
          f"{first}) = share of (run, {first} run) pairs on the same env that the variant wins, "
          "averaged over envs.", "", f"| variant | normalised IQM [95% CI] | P(> {first}) | runs |",
          "|---|---|---|---|"]
    for v, (m, lo, hi, poi, n) in summary.items():
        md.append(f"| {labels.get(v, v)} | {m:.2f} [{lo:.2f}, {hi:.2f}] | {'-' if poi is None else f'{poi:.2f}'} | {n} |")
    return md


GRID_VARIANT = re.compile(r"^(?P<algo>[a-z0-9]+)-lr(?P<lr>[0-9.e-]+)-clip(?P<clip>[0-9.]+)$")


def _robustness(rows: list[dict], envs, variants) -> list[str]:
    """For the lr x clip grid (variants named ``<algo>-lr<lr>-clip<clip>``): per env and algorithm, the
    grid of mean final returns over seeds and its spread across cells (the robustness claim, issue #4).
    With several seeds per cell the spread line adds the mean within-cell seed std, so that the part of
    the across-cell spread that seed noise alone would give can be judged."""
    cells = {}  # (env, algo) -> {(lr, clip): final returns over seeds}
    for v in variants:
        m = GRID_VARIANT.match(v)
        if m is None:
            continue
        for env, x in _scores(rows, envs, v).items():
            cells.setdefault((env, m["algo"]), {})[(m["lr"], m["clip"])] = np.asarray(x, dtype=float)
    if not cells:
        return []
    md = ["", "Robustness over the learning-rate x clip grid: cells are the mean final return over seeds; the "
          "spread row summarises the grid's cells (mean, sample std (ddof=1) over cells, worst and best cell, "
          "worst / best) and, where cells have 2+ seeds, the mean seed sample std within a cell.", ""]
    for (env, algo), grid in cells.items():
        lrs = sorted({k[0] for k in grid}, key=float)
        clips = sorted({k[1] for k in grid}, key=float)
        md += [f"**{env}, {algo}**", "", "| lr / clip | " + " | ".join(clips) + " |", "|---" * (len(clips) + 1) + "|"]
        md += [f"| {lr} | " + " | ".join(f"{grid[(lr, c)].mean():.0f}" if (lr, c) in grid else "-" for c in clips)
               + " |" for lr in lrs]
        x = np.array([seeds.mean() for seeds in grid.values()])
        ratio = f"{x.min() / x.max():.2f}" if x.max() > 0 else "n/a"
        line = (f"spread over {len(x)} cells: mean {x.mean():.0f}, std {sample_std(x):.0f}, worst {x.min():.0f}, "
                f"best {x.max():.0f}, worst / best {ratio}")
        seed_stds = [sample_std(seeds) for seeds in grid.values() if len(seeds) > 1]
        if seed_stds:
            n_min, n_max = min(map(len, grid.values())), max(map(len, grid.values()))
            n_seeds = f"{n_min}-{n_max}" if n_min < n_max else f"{n_max}"
            line += (f"; seed std within a cell {np.mean(seed_stds):.0f} (mean over {len(seed_stds)} cells, "
                     f"{n_seeds} seeds each)")
        md += ["", line, ""]
    return md


def _table(out: Path, curve_rows: list[dict], rows: list[dict], envs, variants, total_steps: int,
           labels: Optional[dict] = None) -> list[str]:
    """The source's layout (env rows, variant columns headed by ``labels``), plus one learning-curve PNG per env."""
    labels = labels or {}
    md = ["", "| env | " + " | ".join(labels.get(v, v) for v in variants) + " |", "|---" * (len(variants) + 1) + "|"]
    per_variant = {v: _scores(rows, envs, v) for v in variants}
    for env in envs:
        cells = []
        for v in variants:
            x = per_variant[v].get(env)
            if not x:
                cells.append("-")
                continue
            lo, hi = stratified_bootstrap_ci({env: x}, iqm, reps=2000)
            cells.append(f"{mean_pm_std(x)} ({len(x)}); IQM {iqm(x):.0f} [{lo:.0f}, {hi:.0f}]")
        md.append(f"| {env} | " + " | ".join(cells) + " |")
        _plot(out, curve_rows, rows, env, variants, total_steps)
    return md


def write_report(out: Path, runs: Path, envs, variants, seeds, total_steps: int, command: str) -> None:
    """Rebuild the folder's tables and plots from its committed rows plus the runs finished here."""
    local = _summaries(runs, envs, variants, seeds)
    rows = merge_rows(read_rows(out / "results.csv"), local, RUN_KEY)
    if not rows:
        print("no finished runs yet")
        return
    check_budget(rows, total_steps, out)
    curve_rows = merge_rows(read_rows(out / "curves.csv"), _local_curves(runs, local, total_steps), (*RUN_KEY, "step"))
    write_rows(out / "results.csv", rows)
    if curve_rows:
        write_rows(out / "curves.csv", curve_rows)
    envs = list(dict.fromkeys([*(r["env"] for r in rows), *envs]))  # committed order first, then new ones
    variants = list(dict.fromkeys([*(r["variant"] for r in rows), *variants]))
    seeds = sorted({r["seed"] for r in rows})
    grid = _robustness(rows, envs, variants)
    labels = {v: column_label(v, r) for v, r in column_recipes(out, variants).items()}
    cells = "" if grid else (" Cells: mean +- sample std (ddof=1) over seeds (n), then IQM [95% bootstrap CI]. A "
                             "column named after an algorithm ran its own settings unless its header names a recipe.")
    earlier = len(rows) - len(local)
    origin = (f" (made {len(local)} of the {len(rows)} runs; the other {earlier} were committed in results.csv by "
              "earlier sweeps, see the notes; its `cpu` column names each run's machine where recorded)"
              if earlier else "")
    md = [f"# MuJoCo benchmark ({time.strftime('%Y-%m-%d')})", "", f"Command: `{command}`{origin}", "",
          f"Budget: {total_steps} env steps per run; seeds {list(seeds)}; score = mean return of the last 10 "
          f"training episodes. Machine: {machine(with_load=False)}.{cells}"]
    md += grid or (_table(out, curve_rows, rows, envs, variants, total_steps, labels)
                   + aggregate_table(rows, envs, variants, labels))
    md += ["", "Reference numbers (not ours; different budgets): the source's claims (PPO / GRPO / DAPO, "
           "'10 runs'): " + "; ".join(f"{k} {a}/{b}/{c}" for k, (a, b, c) in SOURCE_CLAIMS.items())
           + ". CleanRL PPO at 1M steps (v4): " + ", ".join(f"{k} {v}" for k, v in CLEANRL_PPO_1M.items()) + "."]
    write_results_md(out / "results.md", "\n".join(md))
    print("\n".join(md))
