"""Steps per second of dapo-maddpg against maddpg, side by side (issue #47: within 20%).

The two run alternately in one process, ``--reps`` times each, on simple_spread_v3 (N=3, discrete actions) with the
benchmark's recipes, ``--steps`` env steps per run (collection, replay and every update after the 5,000 warm-up
steps; no evaluation), torch 1 thread, after one short untimed run that pays for imports.  Alternating pairs share
the machine's load at the time, so the ratio of each pair is the measure; the report gives every pair's ratio and
their median.

    python -m experiments.ma_maddpg_speed --steps 20000 --reps 3 --out experiments/results/ma_maddpg/speed.md
"""
from __future__ import annotations

import platform
import sys
import tempfile
import time
from pathlib import Path

from experiments.sweep import caller_path, parser, script_main

PAIR = ("maddpg", "dapo-maddpg")


def timed_run(variant: str, steps: int, seed: int) -> float:
    """Env steps per second of one run of ``variant`` (wall clock of dapo_ma.train)."""
    import dapo_ma
    from experiments.ma_maddpg import ENV, RECIPES, env_kwargs

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        # the recipes' learning_starts (5000) as measured; a shorter smoke run starts learning half-way (a run that
        # never updates is refused)
        short = {"learning_starts": steps // 2} if steps <= 5000 else {}
        result = dapo_ma.train(recipe=(str(RECIPES / f"{variant}.yaml"),), env=ENV, env_kwargs=env_kwargs("discrete"),
                               seed=seed, total_steps=steps, run_dir=str(Path(d) / "run"), eval_episodes=0,
                               progress=False, tensorboard=False, **short)
        wall = time.perf_counter() - t0
    return result.summary["total_steps"] / wall


def report(rates: dict[str, list[float]], args) -> str:
    import numpy as np

    ratios = [d / m for m, d in zip(rates[PAIR[0]], rates[PAIR[1]])]
    rows = "\n".join(f"| {i + 1} | {m:.0f} | {d:.0f} | {d / m:.2f} |"
                     for i, (m, d) in enumerate(zip(rates[PAIR[0]], rates[PAIR[1]])))
    return (f"# dapo-maddpg vs maddpg: env steps per second, side by side\n\n"
            f"| pair | maddpg | dapo-maddpg | ratio |\n|---|---|---|---|\n{rows}\n\n"
            f"Median ratio {np.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f}); target: >= 0.80.\n\n"
            f"Command: `python -m experiments.ma_maddpg_speed --steps {args.steps} --reps {args.reps}`; "
            f"simple_spread_v3 N=3, discrete actions, the benchmark's recipes, torch 1 thread; machine: "
            f"{platform.machine()}, {platform.python_version()}, 2 CPU cores shared with other work.\n")


def main(argv=None, prog=None) -> int:
    p = parser(prog, __doc__)
    p.add_argument("--steps", type=int, default=20000, help="env steps per run [20000]")
    p.add_argument("--reps", type=int, default=3, help="alternating pairs [3]")
    p.add_argument("--out", type=caller_path, help="write the report here (markdown) as well as printing it")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.steps < 2048 or args.reps < 1:  # a run must hold one batch (1024) after learning starts
        p.error(f"--steps must be >= 2048 and --reps >= 1, got {args.steps} and {args.reps}")
    import torch

    torch.set_num_threads(1)
    timed_run(PAIR[1], 2048, seed=0)  # untimed: imports, env and network set-up paid once
    rates: dict[str, list[float]] = {v: [] for v in PAIR}
    for rep in range(args.reps):
        for variant in PAIR if rep % 2 == 0 else PAIR[::-1]:  # alternate who goes first
            rates[variant].append(timed_run(variant, args.steps, seed=rep + 1))
            print(f"pair {rep + 1}: {variant} {rates[variant][-1]:.0f} steps/s", flush=True)
    text = report(rates, args)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    script_main(main)
