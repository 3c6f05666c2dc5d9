"""MuJoCo benchmark (issue #4): {ppo, grpo, dapo, SB3 PPO} x envs x seeds, ablations, robustness grid.

Variants are recipe files (experiments/recipes/mujoco/<name>.yaml, each with its base recipe and a comment on why it
was tried and what it gave); the suites name them (experiments/recipes/mujoco_suites.yaml).

Every run is a ``dapo run`` (or an SB3 worker) in its own process under
``RUNS/<suite>/<env>/<variant>/s<seed>`` (``--runs-dir``, default ``runs/mujoco_benchmark``, not
committed); a run with a summary.json is skipped and an interrupted one is resumed, so an interrupted
sweep simply continues when re-launched.  ``--jobs`` runs that many at once (2 uses both cores of the
build machines).  The report (results.csv, curves.csv, results.md with mean +- sample std and IQM with a
stratified-bootstrap 95% CI, one learning-curve PNG per env) is rebuilt at the end from the runs
finished here merged with the rows already committed in ``--out``: more seeds on a fresh machine extend
a table, and a run re-done here replaces its committed row.  A report for another ``--total-steps``
than the folder's runs is refused.

    python -m experiments.mujoco_benchmark --quick                       # minutes: smoke test
    python -m experiments.mujoco_benchmark --envs HalfCheetah-v5 Walker2d-v5 --seeds 1 2 3 --total-steps 1000000
    python -m experiments.mujoco_benchmark --suite ablation --envs HalfCheetah-v5 Humanoid-v5
    python -m experiments.mujoco_benchmark --suite robustness --envs Hopper-v5
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional

from experiments.sweep import (ROOT, caller_path, failures, parser, positive_int, run_cli, run_command, run_jobs,
                               script_main, seed_int)

RECIPES = ROOT / "experiments" / "recipes" / "mujoco"  # one YAML file per variant (base chains, comments: why)
SUITES_FILE = ROOT / "experiments" / "recipes" / "mujoco_suites.yaml"


def load_suites() -> dict[str, dict[str, Optional[str]]]:
    """suite -> {row label: recipe name (None: the SB3 PPO peer)}, from experiments/recipes/mujoco_suites.yaml."""
    import yaml

    return yaml.safe_load(SUITES_FILE.read_text())


def recipe_flags(recipe: Optional[str]) -> Optional[list[str]]:
    """The ``dapo run`` flags of a variant: its recipe file (None stays None: not a ``dapo run``)."""
    return None if recipe is None else ["--recipe", str(RECIPES / f"{recipe}.yaml")]


SUITES = {suite: {label: recipe_flags(recipe) for label, recipe in table.items()}
          for suite, table in load_suites().items()}


def run_dir(runs: Path, env: str, variant: str, seed: int) -> Path:
    return runs / env / variant / f"s{seed}"


def run_one(runs: Path, env: str, variant: str, flags, seed: int, steps: int) -> str:
    d = run_dir(runs, env, variant, seed)
    if flags is None:
        if (d / "summary.json").exists():
            return f"skip {d}"
        return run_command([sys.executable, "-m", "experiments.mujoco_benchmark", "--sb3-worker", env, str(seed),
                            str(steps), str(d)], d)
    return run_cli(d, ["--env", env, *flags, "--seed", str(seed), "--total-steps", str(steps), "--no-progress",
                       "--no-tensorboard"])


def sb3_worker(env: str, seed: int, steps: int, out: Path) -> None:
    """SB3 PPO with CleanRL/SB3-zoo MuJoCo settings, writing metrics.csv and summary.json like ours."""
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from core.training.checkpoint import write_json
    from core.training.logging import MetricLogger

    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    logger = MetricLogger(out, tensorboard=False)

    class Log(BaseCallback):
        def _on_rollout_end(self) -> None:
            eps = [e["r"] for e in self.model.ep_info_buffer]
            logger.log(self.num_timesteps, {"rollout/ep_return_mean": float(np.mean(eps[-10:])) if eps else float("nan")})

        def _on_step(self) -> bool:
            return True

    t0 = time.perf_counter()
    venv = VecNormalize(make_vec_env(env, n_envs=1, seed=seed), gamma=0.99)
    model = PPO("MlpPolicy", venv, n_steps=2048, batch_size=64, n_epochs=10, learning_rate=3e-4, gamma=0.99,
                gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, seed=seed,
                policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh),
                device="cpu", verbose=0)
    model.learn(total_timesteps=steps, callback=Log())
    wall = time.perf_counter() - t0
    eps = [e["r"] for e in model.ep_info_buffer][-10:]
    write_json(out / "summary.json", {"env": env, "algo": "sb3-ppo", "seed": seed, "total_steps": model.num_timesteps,
                                      "wall_time_s": wall, "sps": model.num_timesteps / wall,
                                      "final_return_mean": float(np.mean(eps)) if eps else float("nan"),
                                      "eval_return_mean": float("nan"), "eval_return_std": float("nan")})
    logger.close()


def main(argv=None, prog=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = parser(prog, __doc__)
    p.add_argument("--suite", choices=sorted(SUITES), default="main", help="main table, ablations, robustness grid or overlap (double buffering) check")
    p.add_argument("--envs", nargs="+", default=["HalfCheetah-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5"])
    p.add_argument("--variants", nargs="+", help="subset of the suite's variants (default: all)")
    p.add_argument("--seeds", nargs="+", type=seed_int, default=[1, 2, 3])
    p.add_argument("--total-steps", type=positive_int, default=1_000_000, help="env steps per run")
    p.add_argument("--jobs", type=positive_int, default=2, help="runs in parallel")
    p.add_argument("--out", type=caller_path, default=ROOT / "experiments" / "results" / "mujoco", help="tables and plots")
    p.add_argument("--runs-dir", type=caller_path, default=ROOT / "runs" / "mujoco_benchmark", help="run directories")
    p.add_argument("--quick", action="store_true", help="smoke preset: HalfCheetah, 2 seeds, 8192 steps")
    p.add_argument("--report-only", action="store_true",
                   help="rebuild the tables and plots from finished runs (notes below the results.md marker are kept)")
    p.add_argument("--sb3-worker", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sb3_worker:
        env, seed, steps, out = args.sb3_worker
        sb3_worker(env, int(seed), int(steps), Path(out))
        return 0
    if args.quick:
        args.envs, args.seeds, args.total_steps = ["HalfCheetah-v5"], [1, 2], 8192
    variants = SUITES[args.suite]
    if args.variants:
        unknown = set(args.variants) - set(variants)
        if unknown:
            p.error(f"unknown variants {sorted(unknown)}; choose from {sorted(variants)}")
        variants = {k: variants[k] for k in args.variants}
    from core.envs.make import check_env_id

    for env in args.envs:  # an unknown env: one line before any run starts
        check_env_id(env)
    out = args.out / args.suite if args.suite != "main" else args.out
    runs = args.runs_dir / args.suite
    statuses = []
    if not args.report_only:
        jobs = [(runs, env, v, f, s, args.total_steps) for env in args.envs for s in args.seeds for v, f in variants.items()]
        statuses = run_jobs(jobs, run_one, args.jobs, runs)
    if statuses and all(s.startswith("FAILED") for s in statuses):
        return failures(statuses)  # nothing to report
    from experiments.mujoco_report import write_report

    out.mkdir(parents=True, exist_ok=True)
    command = "python -m experiments.mujoco_benchmark " + " ".join(a for a in argv if a != "--report-only")
    write_report(out, runs, args.envs, list(variants), args.seeds, args.total_steps, command)
    return failures(statuses)


if __name__ == "__main__":
    script_main(main)
