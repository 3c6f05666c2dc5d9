"""The ``dapo`` command: ``dapo run`` trains, ``dapo eval RUN_DIR`` evaluates a saved run."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence

from core.cli_config import OneLineParser, add_config_flags, build_config
from core.config import ConfigError, RunInterrupted

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="dapo", description="DAPO toolkit: PPO, GRPO and DAPO for Gymnasium.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    run = sub.add_parser("run", help="train one experiment (default: DAPO on CartPole-v1, ~1 minute)",
                         description="Train PPO, GRPO or DAPO. Unset options come from presets chosen by the "
                                     "env family (classic control / continuous control) and the algorithm.")
    run.add_argument("--config", type=Path, default=None, metavar="FILE.yaml",
                     help="YAML file of option: value pairs (flags given on the command line win)")
    run.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                     help="continue the run in RUN_DIR from its checkpoint (metrics and TensorBoard continue)")
    add_config_flags(run)
    ev = sub.add_parser("eval", help="evaluate a saved run", description="Roll out a saved run's policy "
                        "with its saved observation normaliser and print the mean and std return.")
    ev.add_argument("run_dir", type=Path, help="run directory written by 'dapo run'")
    ev.add_argument("--episodes", type=int, default=10, help="episodes to run (default: 10)")
    ev.add_argument("--seed", type=int, default=12345, help="env seed (default: 12345)")
    ev.add_argument("--device", default="cpu", help="auto | cpu | cuda (default: cpu)")
    ev.add_argument("--stochastic", action="store_true", help="sample actions instead of the mean/argmax")
    return parser


def _run(args) -> int:
    from core.runner import run_experiment

    flags = {k: v for k, v in vars(args).items() if k not in ("command", "config", "resume")}
    cfg = build_config(flags, args.config, args.resume)
    s = run_experiment(cfg, resume=args.resume is not None)
    if s is None:  # a data-parallel rank other than 0
        return 0
    print(f"{s['algo']} on {s['env']}: {s['total_steps']} steps in {s['wall_time_s']:.0f}s ({s['sps']:.0f} SPS); "
          f"final_return_mean {s['final_return_mean']:.1f}; eval {s['eval_return_mean']:.1f} "
          f"+- {s['eval_return_std']:.1f}; health events {s['health_events']}; outputs in {s['run_dir']}")
    return 0


def _eval(args) -> int:
    from core.evaluation import evaluate_run, mean_std

    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    returns = evaluate_run(args.run_dir, args.episodes, args.seed, args.device, not args.stochastic)
    mean, std = mean_std(returns)
    print(f"eval_return_mean {mean:.2f} eval_return_std {std:.2f} over {len(returns)} episodes")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {"run": _run, "eval": _eval}[args.command](args)
    except ConfigError as e:
        print(f"dapo {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except RunInterrupted as e:
        print(f"interrupted: checkpoint saved; continue with: dapo run --resume {e.run_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED

if __name__ == "__main__":
    sys.exit(main())
