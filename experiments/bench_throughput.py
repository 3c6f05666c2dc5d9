"""Throughput benchmark: this toolkit's PPO/DAPO against Stable-Baselines3 PPO, side by side.

Every measured run is a fresh subprocess (so peak RSS is its own), and peers are interleaved within
each repeat, so that machine noise hits all of them alike.  Parts (issue #3):

  a  equal hyper-parameters: HalfCheetah-v5, 1 env x 2048 steps, 10 epochs, minibatch 64, 64x64 tanh
     MLPs, observation + reward normalisation: ours ppo, ours dapo, SB3 PPO (DummyVecEnv + VecNormalize)
  b  best configuration: ours with many envs (sync; NumPy or torch update; --overlap; --compile; async
     env processes; EnvPool) vs SB3 with SubprocVecEnv and DummyVecEnv at the same count
  c  the limit: raw random-action stepping rate of the same vector env (sync, async, EnvPool); our SPS as
     a fraction of it, end to end and per iteration after the first, and our per-iteration time split
     into collect / advantage / update
  d  DAPO's per-iteration time over PPO's (from part a)

    python -m experiments.bench_throughput --total-steps 100000 --repeats 2
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = "HalfCheetah-v5"
OUT = Path(__file__).resolve().parent / "results" / "throughput"


# --- workers (run in a subprocess each) -------------------------------------------------------------
def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def work_ours(algo: str, num_envs: int, total_steps: int, seed: int, threads: int, overlap: bool = False,
              compile: bool = False, numpy_acting: bool = True, backend: str = "sync",
              numpy_update: bool = True, pinned: bool = False) -> dict:
    from core.training.logging import MetricLogger, read_metrics
    from core.run.runner import resolve_for_env
    from core.training.trainer import Trainer

    with tempfile.TemporaryDirectory() as run_dir:
        options = dict(env=ENV, algo=algo, total_steps=total_steps, seed=seed, num_envs=num_envs,
                       num_steps=2048 // num_envs, torch_threads=threads, overlap=overlap, backend=backend,
                       compile=compile, numpy_acting=numpy_acting, numpy_update=numpy_update, progress=False,
                       tensorboard=False, eval_episodes=0, run_dir=run_dir)
        if algo == "dapo":  # the dapo-mujoco recipe with its minibatch draws back on, as the committed rows measured
            options["recipe"] = ("dapo-mujoco",)  # it (the costlier case: the recipe turns the draws off)
            options["dynamic_sampling"] = True
        cfg = resolve_for_env(options)
        t0 = time.perf_counter()
        trainer = Trainer(cfg, Path(run_dir))
        if pinned:  # process placement (issue #59): the learner on the first core, the collector process on the last
            cores = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(0, cores[:-1])
            os.sched_setaffinity(trainer.rollouts.collector.process.pid, cores[-1:])
        init = time.perf_counter() - t0  # envs, networks, collector worker, optimiser (see the report)
        trainer.train(MetricLogger(Path(run_dir), tensorboard=False))
        wall = time.perf_counter() - t0
        m = read_metrics(Path(run_dir) / "metrics.csv")
    phases = {k: statistics.mean(m[f"time/{k}_s"][1:]) for k in ("collect", "advantage", "update")}
    return {"wall_s": wall, "init_s": init, "steps": trainer.global_step, "final_return": trainer.recent_return(),
            "iter_s": sum(phases.values()), **{f"{k}_s": v for k, v in phases.items()}}


def work_sb3(vec: str, num_envs: int, total_steps: int, seed: int, threads: int) -> dict:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    venv = make_vec_env(ENV, n_envs=num_envs, seed=seed, vec_env_cls=SubprocVecEnv if vec == "subproc" else DummyVecEnv)
    venv = VecNormalize(venv, gamma=0.99)
    model = PPO("MlpPolicy", venv, n_steps=2048 // num_envs, batch_size=64, n_epochs=10, learning_rate=3e-4,
                gamma=0.99, gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
                policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh),
                seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=total_steps)
    wall = time.perf_counter() - t0
    eps = [e["r"] for e in model.ep_info_buffer][-10:]
    venv.close()
    return {"wall_s": wall, "steps": int(model.num_timesteps), "final_return": float(sum(eps) / len(eps)) if eps else float("nan")}


def work_raw(num_envs: int, steps: int, seed: int, threads: int, backend: str = "sync") -> dict:
    """Random actions (pre-sampled) through the same vector env the trainer uses."""
    import numpy as np

    from core.envs.make import make_vec_env

    if backend == "envpool":
        from core.envs.backends import EnvPoolBackend

        envs = EnvPoolBackend(ENV, num_envs, seed).envs  # the library's own vector env, as the trainer makes it
    else:
        envs = make_vec_env(ENV, num_envs, asynchronous=backend == "async")
    envs.reset(seed=seed)
    space = getattr(envs, "single_action_space", envs.action_space)  # EnvPool's action_space is per env
    actions = np.array([[space.sample() for _ in range(num_envs)] for _ in range(256)])
    t0 = time.perf_counter()
    for i in range(steps // num_envs):
        envs.step(actions[i % 256])
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "steps": steps // num_envs * num_envs, "final_return": float("nan")}


WORKERS = {"ours": work_ours, "sb3": work_sb3, "raw": work_raw}


# --- driver ------------------------------------------------------------------------------------------
def run_worker(kind: str, **kw) -> dict:
    cmd = [sys.executable, "-m", "experiments.bench_throughput", "--worker", json.dumps({"kind": kind, **kw})]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        raise RuntimeError(f"worker {kind} {kw} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cpu_name() -> str:
    return next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                platform.processor())


def machine(with_load: bool = True) -> str:
    import gymnasium
    import stable_baselines3
    import torch

    return (f"{cpu_name()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}, "
            f"torch {torch.__version__}, gymnasium {gymnasium.__version__}, SB3 {stable_baselines3.__version__}"
            + (f"; load average at start {os.getloadavg()[0]:.2f}" if with_load else ""))


def plan(parts: str, total: int, many_envs: int, threads: int, seed: int,
         peers: list[str] | None = None) -> list[tuple[str, str, dict]]:
    """The runs of ``parts``; with ``peers``, only the training runs of those names (raw stepping always)."""
    runs = []
    if "a" in parts or "d" in parts:
        runs += [("a", "ours ppo", dict(kind="ours", algo="ppo", num_envs=1)),
                 ("a", "ours dapo", dict(kind="ours", algo="dapo", num_envs=1)),
                 ("a", "ours ppo, torch acting", dict(kind="ours", algo="ppo", num_envs=1, numpy_acting=False)),
                 ("a", "ours ppo, torch update", dict(kind="ours", algo="ppo", num_envs=1, numpy_update=False)),
                 ("a", "SB3 PPO", dict(kind="sb3", vec="dummy", num_envs=1))]
    if "b" in parts:
        runs += [("b", f"ours dapo x{many_envs} envs", dict(kind="ours", algo="dapo", num_envs=many_envs)),
                 ("b", f"ours ppo x{many_envs} envs", dict(kind="ours", algo="ppo", num_envs=many_envs)),
                 ("b", f"ours ppo x{many_envs} envs, torch update", dict(kind="ours", algo="ppo", num_envs=many_envs,
                                                                         numpy_update=False)),
                 ("b", f"ours ppo x{many_envs} envs +overlap", dict(kind="ours", algo="ppo", num_envs=many_envs,
                                                                    overlap=True)),
                 ("b", f"ours ppo x{many_envs} envs +overlap pinned", dict(kind="ours", algo="ppo", num_envs=many_envs,
                                                                           overlap=True, pinned=True)),
                 ("b", f"ours dapo x{many_envs} envs +overlap", dict(kind="ours", algo="dapo", num_envs=many_envs,
                                                                     overlap=True)),
                 ("b", f"ours ppo x{many_envs} envs +compile", dict(kind="ours", algo="ppo", num_envs=many_envs,
                                                                    compile=True)),
                 # env processes step while the learner updates: the two cores work at once
                 ("b", f"ours ppo x{many_envs} envs async +overlap",
                  dict(kind="ours", algo="ppo", num_envs=many_envs, backend="async", overlap=True)),
                 # EnvPool steps its envs in C++ threads (HalfCheetah-v5 is one of its MuJoCo ids)
                 ("b", f"ours ppo x{many_envs} envs envpool", dict(kind="ours", algo="ppo", num_envs=many_envs,
                                                                   backend="envpool")),
                 ("b", f"ours ppo x{many_envs} envs envpool +overlap",
                  dict(kind="ours", algo="ppo", num_envs=many_envs, backend="envpool", overlap=True)),
                 ("b", f"SB3 PPO SubprocVecEnv x{many_envs}", dict(kind="sb3", vec="subproc", num_envs=many_envs)),
                 ("b", f"SB3 PPO DummyVecEnv x{many_envs}", dict(kind="sb3", vec="dummy", num_envs=many_envs))]
    if "c" in parts:
        runs += [("c", f"raw env stepping x{n}", dict(kind="raw", num_envs=n)) for n in sorted({1, many_envs})]
        runs += [("c", f"raw env stepping x{many_envs} {b}", dict(kind="raw", num_envs=many_envs, backend=b))
                 for b in ("async", "envpool")]
    if peers:
        trained = [name for _, name, kw in runs if kw["kind"] != "raw"]
        unknown = sorted(set(peers) - set(trained))
        if unknown:
            raise SystemExit(f"error: unknown --peers {unknown} for --parts {parts}; choose from: "
                             + "; ".join(trained))
        runs = [r for r in runs if r[1] in peers or r[2]["kind"] == "raw"]
    for _, _, kw in runs:
        kw.update({"threads": threads, "seed": seed, ("steps" if kw["kind"] == "raw" else "total_steps"): total})
    return runs


def main(argv=None, prog=None) -> int:
    from experiments.sweep import caller_path, parser, positive_int, seed_int

    argv = sys.argv[1:] if argv is None else list(argv)
    p = parser(prog, __doc__)
    p.add_argument("--total-steps", type=positive_int, default=100_000, help="env steps per training run")
    p.add_argument("--repeats", type=positive_int, default=2, help="interleaved repeats of every run")
    p.add_argument("--parts", default="abcd", help="which parts to run (subset of abcd)")
    p.add_argument("--many-envs", type=positive_int, default=8, help="env count for the best-configuration part b")
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads for every peer")
    p.add_argument("--seed", type=seed_int, default=1)
    p.add_argument("--peers", nargs="+", metavar="NAME",
                   help="run only these training peers of the chosen parts (exact names as in the tables, e.g. "
                        "'ours ppo x8 envs +overlap'); raw stepping runs are always kept")
    p.add_argument("--out", type=caller_path, default=OUT, help="results directory")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.parts or set(args.parts) - set("abcd"):
        p.error(f"--parts must be letters of abcd, got '{args.parts}'")
    if args.worker:
        spec = json.loads(args.worker)
        result = WORKERS[spec.pop("kind")](**spec)
        print(json.dumps({**result, "peak_rss_mb": _peak_rss_mb()}))
        return 0
    from experiments.throughput_report import write_report

    args.out.mkdir(parents=True, exist_ok=True)
    header = machine()
    rows = []
    runs = plan(args.parts, args.total_steps, args.many_envs, args.threads, args.seed, args.peers)
    for rep in range(args.repeats):
        for part, name, kw in runs:
            try:
                r = run_worker(**kw)
            except RuntimeError as e:  # a failed worker: one line, and no report from partial rows
                print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
                return 1
            r.update(part=part, peer=name, repeat=rep, sps=r["steps"] / r["wall_s"])
            rows.append(r)
            print(f"[{rep + 1}/{args.repeats}] {part} {name:34s} {r['sps']:8.0f} SPS  wall {r['wall_s']:6.1f}s  "
                  f"rss {r['peak_rss_mb']:6.0f} MB  return {r['final_return']:8.1f}", flush=True)
    command = "python -m experiments.bench_throughput " + " ".join(f"'{a}'" if " " in a else a for a in argv)
    write_report(rows, args.out, command, header, args)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.sweep import script_main
    script_main(main)
