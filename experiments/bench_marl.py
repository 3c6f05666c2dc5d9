"""Multi-agent throughput (issue #59): our MAPPO against BenchMARL's MAPPO on simple_spread_v3, side by side.

Peer: BenchMARL (Bettini et al. 2024, ``pip install benchmarl``): maintained, installs from the package index, runs
PettingZoo's MPE tasks through TorchRL, and its MAPPO is the usual reference implementation of Yu et al. 2022
outside the authors' code.  It needs TorchRL, so it runs from its own virtual environment (``--peer-python``; made
with ``python -m venv V && V/bin/pip install torch==<ours> benchmarl mpe2``), each run a fresh subprocess.

Equal settings: mpe2 ``simple_spread_v3`` (N=3, local_ratio 0.5, max_cycles 25, discrete actions); 16 envs x 25
steps = 400 joint steps per batch; 10 full-batch gradient steps per batch (our 10 epochs x 1 minibatch, BenchMARL's
10 minibatch iterations of 400); one Adam, lr 7e-4; 64x64 tanh MLPs; actor parameters shared by the agents; a
centralised critic; gamma 0.99, GAE lambda 0.95, clip 0.2, no entropy bonus, gradient norm clip 0.5; no
evaluation, logging or checkpoints inside the timed run (ours keeps its final checkpoint, as every run does).
Rate = joint env steps per second of the whole run (set-up included), torch 1 thread for both.

MADDPG (BenchMARL's supports continuous actions only, so both run ``continuous_actions=True``): 8 envs; 5,000
random warm-up steps; one gradient step of 1,024 joint transitions per 32 joint env steps (ours: ``train_every`` 4
batched steps of 8 envs; BenchMARL: 8 optimiser steps per collected batch of 256 frames); replay 200k; Polyak tau
0.01; lr 7e-4 (ours: 1e-3 for the critic, BenchMARL has one lr); 64x64 tanh MLPs, actor and critic parameters shared;
gradient norm clip 0.5.  Exploration noise differs (ours Gaussian 0.1 of the range, BenchMARL's annealed additive
Gaussian): it costs the same per step.

    python -m experiments.bench_marl --peer-python /work/peers/marl/bin/python --total-steps 40000 --repeats 3
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N_ENVS, N_STEPS, GRAD_STEPS, LR = 16, 25, 10, 7e-4
# MADDPG: envs, batched steps per gradient step, minibatch, replay, warm-up, Polyak tau
OFF_ENVS, TRAIN_EVERY, BATCH, BUFFER, WARMUP, TAU = 8, 4, 1024, 200_000, 5_000, 0.01
SPREAD = {"N": 3, "local_ratio": 0.5, "max_cycles": 25}
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "throughput" / "marl"
TARGET = 2.0  # issue #59: at least 2x the peer's env steps per second


def work_ours(total_steps: int, seed: int, algo: str = "mappo") -> dict:
    import dapo_ma

    if algo == "mappo":
        settings = dict(env_kwargs=SPREAD, num_envs=N_ENVS, num_steps=N_STEPS, num_epochs=GRAD_STEPS,
                        num_minibatches=1, anneal_lr=False, ent_coef=0.0, gae_lambda=0.95, clip_eps=0.2)
    else:
        settings = dict(env_kwargs={**SPREAD, "continuous_actions": True}, num_envs=OFF_ENVS, train_every=TRAIN_EVERY,
                        batch_size=BATCH, buffer_size=BUFFER, learning_starts=WARMUP, tau=TAU, parameter_sharing=True)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        result = dapo_ma.train(algo=algo, env="simple_spread_v3", lr=LR, max_grad_norm=0.5, hidden_sizes=(64, 64),
                               torch_threads=1, seed=seed, total_steps=total_steps, run_dir=str(Path(d) / "run"),
                               eval_episodes=0, progress=False, tensorboard=False, **settings)
        wall = time.perf_counter() - t0
    return {"wall_s": wall, "steps": int(result.summary["total_steps"]),
            "final_return": float(result.summary.get("final_return_mean", float("nan")))}


def work_benchmarl(total_steps: int, seed: int, algo: str = "mappo") -> dict:
    import mpe2
    import mpe2.all_modules
    import torch

    # TorchRL 0.11 looks for MPE under its old place, pettingzoo.mpe (moved to mpe2 in PettingZoo 1.25): the alias
    # gives BenchMARL the very env code ours runs
    sys.modules["pettingzoo.mpe"], sys.modules["pettingzoo.mpe.all_modules"] = mpe2, mpe2.all_modules
    from benchmarl.algorithms import MaddpgConfig, MappoConfig
    from benchmarl.environments import PettingZooTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
        task.config.update(**SPREAD, continuous_actions=algo == "maddpg")
        cfg = ExperimentConfig.get_from_yaml()
        common = dict(sampling_device="cpu", train_device="cpu", buffer_device="cpu", share_policy_params=True,
                      prefer_continuous_actions=algo == "maddpg", gamma=0.99, lr=LR, clip_grad_norm=True,
                      clip_grad_val=0.5, max_n_frames=total_steps, evaluation=False, render=False, loggers=[],
                      create_json=False, save_folder=d, checkpoint_interval=0, checkpoint_at_end=False)
        if algo == "mappo":
            common.update(on_policy_collected_frames_per_batch=N_ENVS * N_STEPS, on_policy_n_envs_per_worker=N_ENVS,
                          on_policy_n_minibatch_iters=GRAD_STEPS, on_policy_minibatch_size=N_ENVS * N_STEPS)
            config = MappoConfig.get_from_yaml()
            config.entropy_coef, config.lmbda, config.clip_epsilon = 0.0, 0.95, 0.2
        else:
            per_batch = 8  # optimiser steps per collection: 8 x 32 = 256 frames
            common.update(off_policy_collected_frames_per_batch=per_batch * OFF_ENVS * TRAIN_EVERY,
                          off_policy_n_envs_per_worker=OFF_ENVS, off_policy_n_optimizer_steps=per_batch,
                          off_policy_train_batch_size=BATCH, off_policy_memory_size=BUFFER,
                          off_policy_init_random_frames=WARMUP, soft_target_update=True, polyak_tau=TAU)
            config = MaddpgConfig.get_from_yaml()
        for k, v in common.items():
            setattr(cfg, k, v)
        config.share_param_critic = True
        model = MlpConfig.get_from_yaml()
        model.num_cells, model.activation_class = [64, 64], torch.nn.Tanh
        experiment = Experiment(task=task, algorithm_config=config, model_config=model, critic_model_config=model,
                                seed=seed, config=cfg)
        experiment.run()
        wall = time.perf_counter() - t0
        steps = int(experiment.total_frames)
    return {"wall_s": wall, "steps": steps, "final_return": float("nan")}


WORKERS = {"ours": work_ours, "benchmarl": work_benchmarl}


def run_worker(python: str, kind: str, **kw) -> dict:
    cmd = [python, "-m", "experiments.bench_marl", "--worker", json.dumps({"kind": kind, **kw})]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {kind} failed: {proc.stderr.strip()[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None, prog=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:  # in the peer's venv: nothing of this toolkit may be imported
        spec = json.loads(argv[1])
        print(json.dumps(WORKERS[spec.pop("kind")](**spec)))
        return 0
    from experiments.bench_throughput import cpu_name
    from experiments.notes import write_results_md
    from experiments.result_rows import write_rows
    from experiments.sweep import caller_path, parser, positive_int, seed_int

    p = parser(prog, __doc__)
    p.add_argument("--peer-python", required=True, help="python of a venv with benchmarl installed")
    p.add_argument("--total-steps", type=positive_int, default=40_000, help="joint env steps per run")
    p.add_argument("--repeats", type=positive_int, default=3, help="interleaved repeats of both peers")
    p.add_argument("--seed", type=seed_int, default=1)
    p.add_argument("--out", type=caller_path, default=OUT, help="results directory")
    p.add_argument("--algos", nargs="+", choices=("mappo", "maddpg"), default=["mappo", "maddpg"],
                   help="algorithms timed, each ours beside BenchMARL's")
    args = p.parse_args(argv)
    rows = []
    for rep in range(args.repeats):
        for algo in args.algos:
            for kind, python in (("ours", sys.executable), ("benchmarl", args.peer_python)):
                peer = f"{'ours' if kind == 'ours' else 'BenchMARL'} {algo.upper()}"
                r = run_worker(python, kind, total_steps=args.total_steps, seed=args.seed, algo=algo)
                r.update(peer=peer, algo=algo, repeat=rep, sps=r["steps"] / r["wall_s"])
                rows.append(r)
                print(f"[{rep + 1}/{args.repeats}] {peer:16s} {r['sps']:7.0f} steps/s  wall {r['wall_s']:6.1f}s",
                      flush=True)
    peer_versions = subprocess.run([args.peer_python, "-c", "import benchmarl, torchrl, torch; print("
                                    "f'benchmarl {benchmarl.__version__}, torchrl {torchrl.__version__}, "
                                    "torch {torch.__version__}')"], capture_output=True, text=True).stdout.strip()
    import torch

    lines = [f"# Multi-agent throughput: MAPPO and MADDPG on simple_spread_v3 ({time.strftime('%Y-%m-%d')})", "",
             f"Command: `python -m experiments.bench_marl {' '.join(argv)}`", "",
             f"Machine: {cpu_name()}, 2 cores; ours: torch {torch.__version__}; peer: {peer_versions}. "
             f"{args.total_steps} joint env steps per run; settings in the script's docstring.", ""]
    verdicts = []
    for algo in args.algos:
        ours = [r for r in rows if r["algo"] == algo and r["peer"].startswith("ours")]
        peer = [r for r in rows if r["algo"] == algo and not r["peer"].startswith("ours")]
        ratios = [a["sps"] / b["sps"] for a, b in zip(ours, peer)]
        med = statistics.median(ratios)
        verdict = f"{'met' if med >= TARGET else 'NOT met'} ({med:.2f}x vs target {TARGET}x)"
        verdicts.append(f"{algo}: {verdict}")
        name = algo.upper()
        lines += [f"| repeat | ours {name} steps/s | BenchMARL {name} steps/s | ratio |", "|---|---|---|---|"]
        lines += [f"| {i + 1} | {a['sps']:.0f} | {b['sps']:.0f} | {a['sps'] / b['sps']:.2f} |"
                  for i, (a, b) in enumerate(zip(ours, peer))]
        lines += ["", f"{name}: median ratio {med:.2f}; target >= {TARGET}x: {verdict}", ""]
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "results.csv", rows)
    write_results_md(args.out / "results.md", "\n".join(lines))
    print(f"multi-agent target (ours >= {TARGET}x BenchMARL): " + "; ".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(main())
    from experiments.sweep import script_main
    script_main(main)
