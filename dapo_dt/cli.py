"""``dapo dataset collect|d4rl|info``: offline datasets (Minari) made by the toolkit's own agents (Atari games; D4RL-style
MuJoCo data, :mod:`dapo_dt.d4rl`); ``info`` reads any Minari dataset the DT family can train on."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from core.config.flags import OneLineParser
from core.config.options import MAX_SEED
from core.config.errors import ConfigError
from core.run.registry import Command


class Dataset(Command):
    """``dapo dataset collect|info``: make or inspect the offline Atari datasets (Minari) that dt and dapo-dt learn
    from."""

    name = "dataset"
    help = "make offline Atari datasets (Minari) or inspect any Minari dataset for dt / dapo-dt / bc / pct-bc"

    def add_arguments(self, ds: argparse.ArgumentParser) -> None:
        dsub = ds.add_subparsers(dest="dataset_command", required=True, parser_class=OneLineParser)
        col = dsub.add_parser("collect",
                              help="play whole games with trained policies and save them as a Minari dataset",
                              description="Env i plays with policy i mod P; each action is uniform-random with "
                                          "probability --epsilon, else the policy's argmax (or a sample with "
                                          "--no-greedy).")
        col.add_argument("--env", required=True, help="Atari id, e.g. ALE/Pong-v5")
        col.add_argument("--policy", type=Path, action="append", required=True, metavar="RUN_DIR",
                         help="a run directory from 'dapo run' on this env, or one of its snapshots/step_<N>.pt; "
                              "repeat for a mixture of qualities")
        col.add_argument("--epsilon", type=float, default=0.1, help="probability of a uniform-random action [0.1]")
        col.add_argument("--steps", type=int, required=True, help="record whole games until this many steps")
        col.add_argument("--name", required=True, help="Minari dataset id, e.g. pong/mixed-v0")
        col.add_argument("--seed", type=int, default=0, help="env and noise seed [0]")
        col.add_argument("--num-envs", type=int, default=8, help="parallel games [8]")
        col.add_argument("--greedy", action=argparse.BooleanOptionalAction, default=True,
                         help="argmax of the policy when not exploring [on]")
        d4rl = dsub.add_parser("d4rl", help="D4RL-style expert, medium, medium-replay and medium-expert datasets "
                                             "from one 'dapo run --snapshot-every N' on a MuJoCo env",
                               description="Writes NAMESPACE/expert-v0, medium-v0, medium-replay-v0 and "
                                           "medium-expert-v0 with ref_min_score (random) and ref_max_score (expert) "
                                           "in their metadata; how each is made: dapo_dt/d4rl.py.")
        _d4rl_arguments(d4rl)
        info = dsub.add_parser("info", help="episodes, steps, spaces and return distribution of a dataset")
        info.add_argument("name", nargs="?", default=None, help="Minari dataset id in the local store")
        info.add_argument("--path", default=None, metavar="DIR", help="a Minari dataset directory instead of a name")

    def run(self, args) -> int:
        from dapo_dt import collect, data

        if args.dataset_command == "d4rl":
            from dapo_dt import d4rl

            made = d4rl.make(d4rl.D4RLOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(
                d4rl.D4RLOptions)}))
            for kind, m in made.items():
                print(f"{m['name']}: {m['episodes']} episodes, {m['steps']} steps, return mean {m['return_mean']:.1f}")
            return 0
        if args.dataset_command == "collect":
            if not 1 <= args.num_envs <= 1024:
                raise ConfigError(f"--num-envs must be in 1 .. 1024, got {args.num_envs}")
            if not 1 <= args.steps <= 10**9:
                raise ConfigError(f"--steps must be in 1 .. 10**9, got {args.steps}")
            if not 0 <= args.seed <= MAX_SEED:
                raise ConfigError(f"--seed must be in 0 .. {MAX_SEED}, got {args.seed}")
            collect.collect(args.env, args.policy, args.epsilon, args.steps, args.name, args.seed, args.num_envs,
                            args.greedy)
        path = getattr(args, "path", None)
        if (args.name is None) == (path is None):
            raise ConfigError("give a dataset NAME or --path DIR (one of them)")
        for k, v in data.info(args.name, path).items():
            print(f"{k}: {v}")
        return 0


def _d4rl_arguments(p: argparse.ArgumentParser) -> None:
    """Flags from :class:`dapo_dt.d4rl.D4RLOptions` (its docstrings are the help), defaults shown."""
    from core.config.fields import field_docs
    from dapo_dt.d4rl import D4RLOptions

    docs = field_docs(D4RLOptions)[0]
    for f in dataclasses.fields(D4RLOptions):
        flag = "--" + f.name.replace("_", "-")
        required = f.default is dataclasses.MISSING
        kind = Path if f.name == "run" else str if f.type in ("str",) else int
        default = "" if required or f.default is None else f" [{f.default}]"
        p.add_argument(flag, dest=f.name, type=kind, required=required, default=None if required else f.default,
                       metavar="RUN_DIR" if f.name == "run" else None, help=docs[f.name] + default)
