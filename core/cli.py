"""The ``dapo`` command: ``dapo run`` trains, ``dapo eval RUN_DIR`` evaluates a saved run.

Single-agent Gymnasium runs use :class:`core.config.TrainConfig`; multi-agent PettingZoo runs
(``--algo ippo|mappo|dapo-ma|maddpg``, or an mpe2 ``--env`` such as ``simple_spread_v3``) use
:class:`dapo_ma.config.MAConfig`; Decision Transformers (``--algo dt|dapo-dt``) use
:class:`dapo_dt.config.DTConfig`.  The choice is made before parsing, so ``--help`` lists the flags
of the family asked for (``dapo run --algo dapo-ma --help``).  ``dapo dataset collect|info`` makes
and inspects the offline Atari datasets the Decision Transformers learn from.  ``dapo bench NAME ...``
runs one of the benchmark scripts in ``experiments/`` with its own flags (``dapo bench mujoco --help``).
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Optional, Sequence

import yaml

from core.cli_config import OneLineParser, add_config_flags, build_config
from core.config import ConfigError, RunInterrupted, TrainConfig

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130
BENCHMARKS = {  # dapo bench NAME -> the experiments/ script it runs (the same flags, the same outputs)
    "mujoco": "experiments.mujoco_benchmark",
    "throughput": "experiments.bench_throughput",
    "dt": "experiments.dt_benchmark",
    "ma": "experiments.ma_benchmark",
    "dt-predictability": "experiments.dt_return_predictability",
}


def _flag_value(argv: Sequence[str], flag: str) -> Optional[str]:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _recorded_algo(path: Optional[str], inside_run_dir: bool) -> Optional[str]:
    """The ``algo`` written in a YAML file or a run directory's config.yaml (None if unreadable)."""
    if path is None:
        return None
    try:
        data = yaml.safe_load((Path(path) / "config.yaml" if inside_run_dir else Path(path)).read_text())
    except (OSError, yaml.YAMLError):
        return None
    return data.get("algo") if isinstance(data, dict) else None


def run_family(argv: Sequence[str]) -> str:
    """``core``, ``ma`` (multi-agent) or ``dt`` (Decision Transformer): which config a ``dapo run``/
    ``dapo eval`` command line asks for."""
    from dapo_dt.config import DT_ALGOS
    from dapo_ma.config import MA_ALGOS

    algo = (_flag_value(argv, "--algo") or _recorded_algo(_flag_value(argv, "--resume"), True)
            or _recorded_algo(_flag_value(argv, "--config"), False))
    if algo is None and len(argv) > 1 and argv[0] == "eval":
        algo = _recorded_algo(argv[1], True)
    if algo is not None:
        return "ma" if algo in MA_ALGOS else "dt" if algo in DT_ALGOS else "core"
    env = _flag_value(argv, "--env")
    if env is None:
        return "core"
    from dapo_ma.envs import mpe_env_names

    return "ma" if env in mpe_env_names() or env.startswith("simple_") else "core"  # MPE names


def build_parser(run_config: type = TrainConfig) -> OneLineParser:
    parser = OneLineParser(prog="dapo", description="DAPO toolkit: PPO, GRPO and DAPO for Gymnasium; IPPO, MAPPO, "
                                                    "DAPO-MA and MADDPG for PettingZoo.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    run = sub.add_parser("run", help="train one experiment (default: DAPO on CartPole-v1, ~1 minute)",
                         description=f"{(run_config.__doc__ or '').strip()} Unset options come from presets "
                                     "(env family and algorithm); config.yaml in the run directory records them. "
                                     "Multi-agent flags: dapo run --algo dapo-ma --help.")
    run.add_argument("--config", type=Path, default=None, metavar="FILE.yaml",
                     help="YAML file of option: value pairs (flags given on the command line win)")
    run.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                     help="continue the run in RUN_DIR from its checkpoint (metrics and TensorBoard continue)")
    add_config_flags(run, run_config)
    ev = sub.add_parser("eval", help="evaluate a saved run", description="Roll out a saved run's policy "
                        "with its saved observation normaliser and print the mean and std return.")
    ev.add_argument("run_dir", type=Path, help="run directory written by 'dapo run'")
    ev.add_argument("--episodes", type=int, default=10, help="episodes to run (default: 10)")
    ev.add_argument("--seed", type=int, default=12345, help="env seed (default: 12345)")
    ev.add_argument("--device", default="cpu", help="auto | cpu | cuda (default: cpu)")
    ev.add_argument("--stochastic", action=argparse.BooleanOptionalAction, default=None,
                    help="sample actions instead of the mean/argmax (default: the run's eval_deterministic "
                         "preset: deterministic, stochastic on Atari)")
    _add_dataset_commands(sub)
    bench = sub.add_parser("bench", help="reproduce a benchmark table: " + " | ".join(BENCHMARKS),
                           description="Run a benchmark script of experiments/ (resumable; tables, CSV and plots "
                                       "under experiments/results/). Its flags: dapo bench NAME --help.")
    bench.add_argument("name", choices=list(BENCHMARKS), help="which benchmark")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own flags")
    return parser


def _add_dataset_commands(sub) -> None:
    ds = sub.add_parser("dataset", help="make or inspect offline Atari datasets (Minari) for dt / dapo-dt")
    dsub = ds.add_subparsers(dest="dataset_command", required=True, parser_class=OneLineParser)
    col = dsub.add_parser("collect", help="play whole games with trained policies and save them as a Minari dataset",
                          description="Env i plays with policy i mod P; each action is uniform-random with "
                                      "probability --epsilon, else the policy's argmax (or a sample with --no-greedy).")
    col.add_argument("--env", required=True, help="Atari id, e.g. ALE/Pong-v5")
    col.add_argument("--policy", type=Path, action="append", required=True, metavar="RUN_DIR",
                     help="a run directory from 'dapo run' on this env, or one of its snapshots/step_<N>.pt; "
                          "repeat for a mixture of qualities")
    col.add_argument("--epsilon", type=float, default=0.1, help="probability of a uniform-random action (default: 0.1)")
    col.add_argument("--steps", type=int, required=True, help="record whole games until this many steps")
    col.add_argument("--name", required=True, help="Minari dataset id, e.g. pong/mixed-v0")
    col.add_argument("--seed", type=int, default=0, help="env and noise seed (default: 0)")
    col.add_argument("--num-envs", type=int, default=8, help="parallel games (default: 8)")
    col.add_argument("--greedy", action=argparse.BooleanOptionalAction, default=True,
                     help="argmax of the policy when not exploring (default: on)")
    info = dsub.add_parser("info", help="episodes, steps and return distribution of a dataset")
    info.add_argument("name", help="Minari dataset id")


def _config_class(family: str) -> type:
    if family == "ma":
        from dapo_ma.config import MAConfig
        return MAConfig
    if family == "dt":
        from dapo_dt.config import DTConfig
        return DTConfig
    return TrainConfig


def config_flags(args: argparse.Namespace) -> dict:
    """The parsed ``dapo run`` options that are config fields (all but --config and --resume)."""
    return {k: v for k, v in vars(args).items() if k not in ("command", "config", "resume")}


def _run(args, family: str) -> int:
    if family == "ma":
        from dapo_ma.runner import run_experiment
    elif family == "dt":
        from dapo_dt.runner import run_experiment
    else:
        from core.runner import run_experiment
    cfg = build_config(config_flags(args), args.config, args.resume, _config_class(family))
    s = run_experiment(cfg, resume=args.resume is not None)
    if s is None:  # a data-parallel rank other than 0
        return 0
    if family == "dt":
        print(f"{s['algo']} on {s['env']} ({s['dataset']}, {s['dataset_steps']} steps): {s['grad_steps']} gradient "
              f"steps, {s['online_env_steps']} online env steps in {s['wall_time_s']:.0f}s; eval "
              f"{s['eval_return_mean']:.1f} +- {s['eval_return_std']:.1f} (human-normalised "
              f"{s['human_normalised']:.3f}); outputs in {s['run_dir']}")
        return 0
    print(f"{s['algo']} on {s['env']}: {s['total_steps']} steps in {s['wall_time_s']:.0f}s ({s['sps']:.0f} SPS); "
          f"final_return_mean {s['final_return_mean']:.1f}; eval {s['eval_return_mean']:.1f} "
          f"+- {s['eval_return_std']:.1f}; health events {s['health_events']}; outputs in {s['run_dir']}")
    return 0


def _dataset(args, family: str) -> int:
    from dapo_dt import data

    if args.dataset_command == "collect":
        if args.num_envs < 1:
            raise ConfigError(f"--num-envs must be >= 1, got {args.num_envs}")
        data.collect(args.env, args.policy, args.epsilon, args.steps, args.name, args.seed, args.num_envs,
                     args.greedy)
    for k, v in data.info(args.name).items():
        print(f"{k}: {v}")
    return 0


def _eval(args, family: str) -> int:
    from core.evaluation import mean_std

    if family == "dt":
        from dapo_dt.runner import evaluate_run
    elif family == "ma":
        from dapo_ma.evaluation import evaluate_run
    else:
        from core.evaluation import evaluate_run
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    deterministic = None if args.stochastic is None else not args.stochastic
    returns = evaluate_run(args.run_dir, args.episodes, args.seed, args.device, deterministic)
    mean, std = mean_std(returns)
    print(f"eval_return_mean {mean:.2f} eval_return_std {std:.2f} over {len(returns)} episodes")
    return 0


def _bench(argv: Sequence[str]) -> int:
    """``dapo bench NAME ARGS``: hand ARGS to the script's own parser (so ``--help`` shows its flags)."""
    if not argv:
        print(f"dapo bench: error: name a benchmark: {' | '.join(BENCHMARKS)} (see dapo bench --help)", file=sys.stderr)
        return EXIT_USAGE
    if argv[0] not in BENCHMARKS:
        build_parser().parse_args(["bench", *argv])  # --help, or the one-line error listing the choices (exits)
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return module.main(list(argv[1:]), prog=f"dapo bench {argv[0]}") or 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        return _bench(argv[1:])
    try:
        family = run_family(argv)
        args = build_parser(_config_class(family)).parse_args(argv)
        return {"run": _run, "eval": _eval, "dataset": _dataset}[args.command](args, family)
    except ConfigError as e:
        command = argv[0] if argv else "dapo"
        print(f"dapo {command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except RunInterrupted as e:
        print(f"interrupted: checkpoint saved; continue with: dapo run --resume {e.run_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
