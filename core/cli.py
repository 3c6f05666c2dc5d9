"""The ``dapo`` command: ``dapo run`` trains, ``dapo eval RUN_DIR`` evaluates a saved run.

Single-agent Gymnasium runs use :class:`core.config.TrainConfig`; multi-agent PettingZoo runs
(``--algo ippo|mappo|dapo-ma|maddpg``, or an mpe2 ``--env`` such as ``simple_spread_v3``) use
:class:`dapo_ma.config.MAConfig`.  The choice is made before parsing, so ``--help`` lists the flags
of the family asked for (``dapo run --algo dapo-ma --help``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

import yaml

from core.cli_config import OneLineParser, add_config_flags, build_config
from core.config import ConfigError, RunInterrupted, TrainConfig

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130


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


def is_multi_agent(argv: Sequence[str]) -> bool:
    """Whether ``dapo run``/``dapo eval`` arguments ask for a multi-agent run."""
    from dapo_ma.config import MA_ALGOS

    algo = (_flag_value(argv, "--algo") or _recorded_algo(_flag_value(argv, "--resume"), True)
            or _recorded_algo(_flag_value(argv, "--config"), False))
    if algo is None and len(argv) > 1 and argv[0] == "eval":
        algo = _recorded_algo(argv[1], True)
    if algo is not None:
        return algo in MA_ALGOS
    env = _flag_value(argv, "--env")
    if env is None:
        return False
    from dapo_ma.envs import mpe_env_names

    return env in mpe_env_names() or env.startswith("simple_")  # MPE names (no Gymnasium id starts so)


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
    return parser


def _run(args, multi_agent: bool) -> int:
    if multi_agent:
        from dapo_ma.config import MAConfig
        from dapo_ma.runner import run_experiment
        cls = MAConfig
    else:
        from core.runner import run_experiment
        cls = TrainConfig
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "config", "resume")}
    cfg = build_config(flags, args.config, args.resume, cls)
    s = run_experiment(cfg, resume=args.resume is not None)
    if s is None:  # a data-parallel rank other than 0
        return 0
    print(f"{s['algo']} on {s['env']}: {s['total_steps']} steps in {s['wall_time_s']:.0f}s ({s['sps']:.0f} SPS); "
          f"final_return_mean {s['final_return_mean']:.1f}; eval {s['eval_return_mean']:.1f} "
          f"+- {s['eval_return_std']:.1f}; health events {s['health_events']}; outputs in {s['run_dir']}")
    return 0


def _eval(args, multi_agent: bool) -> int:
    from core.evaluation import mean_std

    if multi_agent:
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    multi_agent = False
    try:
        multi_agent = is_multi_agent(argv)
        if multi_agent:
            from dapo_ma.config import MAConfig
        args = build_parser(MAConfig if multi_agent else TrainConfig).parse_args(argv)
        return {"run": _run, "eval": _eval}[args.command](args, multi_agent)
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
