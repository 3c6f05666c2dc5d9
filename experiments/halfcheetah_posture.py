"""Which HalfCheetah runs run upright and which on their back?  (issue #4, HalfCheetah's two outcomes)

HalfCheetah-v5's 1M-step returns fall into two groups (about 1600-1950 and 3000-5300 in the main table).
This script plays each finished run's final policy for deterministic episodes and reads the torso angle,
observation 1 (``rooty``, radians; 0 upright, +-pi on its back): a run counts as ``flipped`` when the torso
is upside down (cos(angle) < 0) in most of the steps played.

    python -m experiments.halfcheetah_posture --runs-dir runs/mujoco_1M --suites main ablation \\
        --out experiments/results/halfcheetah_posture

Runs are the ``<runs-dir>/<suite>/HalfCheetah-v5/<variant>/s<seed>`` folders of experiments/mujoco_benchmark.py
that have a summary.json (finished); results.csv has one row per run, results.md counts flipped runs per variant.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from core.run.evaluation import evaluate, load_run_policy
from experiments.notes import write_results_md
from experiments.result_rows import write_rows
from experiments.run_folders import add_run_folder_arguments, finished_runs, run_key

ENV = "HalfCheetah-v5"
TORSO_ANGLE = 1  # index of rooty in HalfCheetah's observation (x position excluded)


def flipped_share(observations: np.ndarray) -> float:
    """Share of the observations ``(S, 17)`` with the torso upside down (cos(rooty) < 0)."""
    return float((np.cos(observations[:, TORSO_ANGLE]) < 0).mean())


def posture(run_dir: Path, episodes: int, seed: int) -> tuple[float, float]:
    """Mean deterministic return of the run's final policy and its flipped share over the steps played."""
    cfg, actor, obs_norm = load_run_policy(run_dir)
    if cfg.env != ENV:
        raise SystemExit(f"error: {run_dir} trained on {cfg.env}; this script reads {ENV}'s torso angle")
    seen: list[np.ndarray] = []
    returns = evaluate(ENV, actor, obs_norm, episodes, seed, torch.device("cpu"), deterministic=True, seen=seen)
    return float(np.mean(returns)), flipped_share(np.stack(seen))


def summary_table(rows: list[dict]) -> list[str]:
    """Per (suite, variant): runs, flipped runs, and the mean training return of each group."""
    lines = ["| suite | variant | runs | flipped | mean final return, upright | mean final return, flipped |",
             "|---|---|---|---|---|---|"]
    for suite, variant in sorted({(r["suite"], r["variant"]) for r in rows}):
        group = [r for r in rows if (r["suite"], r["variant"]) == (suite, variant)]
        up = [r["final_return"] for r in group if r["posture"] == "upright"]
        down = [r["final_return"] for r in group if r["posture"] == "flipped"]
        mean = lambda xs: f"{np.mean(xs):.0f}" if xs else "-"  # noqa: E731
        lines.append(f"| {suite} | {variant} | {len(group)} | {len(down)} | {mean(up)} | {mean(down)} |")
    return lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_folder_arguments(p, variants_required=False)
    p.add_argument("--episodes", type=int, default=1, help="deterministic episodes per run (1000 steps each)")
    p.add_argument("--seed", type=int, default=0, help="evaluation seed")
    a = p.parse_args(argv)

    runs = finished_runs(a.runs_dir, a.suites, [ENV], a.variants)
    if not runs:
        raise SystemExit(f"error: no finished {ENV} runs under {a.runs_dir}/{{{','.join(a.suites)}}}/{ENV}/; "
                         "check --runs-dir, --suites and --variants")
    rows = []
    for d in runs:
        ret, share = posture(d, a.episodes, a.seed)
        final = json.loads((d / "summary.json").read_text())["final_return_mean"]
        key = run_key(d)  # the results.csv columns predate the env column: this script reads one env
        rows.append({"suite": key["suite"], "variant": key["variant"], "seed": key["seed"], "final_return": final,
                     "eval_return": ret, "flipped_share": share, "posture": "flipped" if share > 0.5 else "upright"})
        print(f"{d}: final {final:.0f}, deterministic {ret:.0f}, flipped in {share:.0%} of steps", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    write_rows(a.out / "results.csv", rows)
    command = " ".join(["python -m experiments.halfcheetah_posture", *(sys.argv[1:] if argv is None else argv)])
    write_results_md(a.out / "results.md", "\n".join(
        [f"# {ENV}: upright or flipped", "", f"Command: `{command}`", "",
         f"{a.episodes} deterministic episode(s) per run on evaluation seed {a.seed}; a run is flipped when its torso "
         "is upside down (cos(rooty) < 0) in more than half of the steps. Final return: the run's training summary.",
         "", *summary_table(rows)]))


if __name__ == "__main__":
    main()
