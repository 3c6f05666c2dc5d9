"""The ``dapo`` command: ``dapo run`` trains, ``dapo eval RUN_DIR`` evaluates a saved run (``--video DIR`` records it),
``dapo recipes`` lists the shipped recipes, ``dapo bench NAME`` runs a benchmark script of a source checkout
(:mod:`core.run.bench`), ``dapo export RUN_DIR --onnx FILE`` writes a run's policy for onnxruntime
(:mod:`core.run.export`), ``dapo tune SPACE --study-dir DIR`` searches run options into a recipe
(:mod:`core.run.tune`); packages add more (``dapo dataset``) through :mod:`core.run.registry`.

Every algorithm family registers itself (:mod:`core.run.registry`), so ``core`` imports nothing above it.  The family is
chosen before parsing (from ``--algo``, a resumed run, a recipe file, or an env only one family claims), so that
``--help`` lists that family's options: ``dapo run --algo mappo --help``.  Bad input: one line on stderr, exit 2,
and no file created or changed.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import textwrap
from pathlib import Path
from typing import Optional, Sequence

import yaml

from core.config.flags import CompactHelp, OneLineParser, add_config_flags
from core.config.options import MAX_SEED
from core.config.errors import ConfigError, RunInterrupted
from core.config.limits import check_device
from core.run.registry import Command, Family, Plugins, plugins

EXIT_USAGE, EXIT_FAILED, EXIT_INTERRUPTED = 2, 1, 130
RUN_USAGE = "dapo run [--algo ALGO] [--env ENV] [--recipe NAME]{ext} [options]"
# Help of the flags that are not config fields (docs/options.md lists them too)
CONFIG_HELP = "A YAML file of option: value pairs, read as a recipe (the same as --recipe FILE); repeatable."
RESUME_HELP = "Continue the run in RUN_DIR from its checkpoint, with its own config.yaml."
EXT_HELP = ("Turn on an extension, or set some options of one a recipe turned on (its others stay; repeated "
            "--ext NAME add up); --ext NAME off removes it.")
TRUST_HELP = ("Make an env that a file (the run's config.yaml, a recipe) names as module:factory: imports and runs "
              "that module's code; only for files you trust.")


GYM_RUNS = "Gymnasium-family runs (ppo, grpo, dapo)"  # what dapo export takes


MAX_LINE = 1000  # characters of an error line: a message never echoes megabytes


def one_line(text: str) -> str:
    """``text`` as one line of at most :data:`MAX_LINE` characters (the middle cut out)."""
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_LINE else f"{text[:700]} ... {text[-(MAX_LINE - 705):]}"


def _flag_values(argv: Sequence[str], flag: str) -> list[str]:
    out = []
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif arg.startswith(flag + "="):
            out.append(arg.split("=", 1)[1])
    return out


def pick_family(argv: Sequence[str], found: Plugins) -> Family:
    """The family a ``dapo run``/``dapo eval`` command line asks for (:meth:`Plugins.select`: by --algo, the resumed
    or evaluated run's algorithm, a recipe file's, else by --env); an unknown --algo: one line listing all."""
    algos, envs = _flag_values(argv, "--algo"), _flag_values(argv, "--env")
    resume = _flag_values(argv, "--resume")
    run_dir = resume[-1] if resume else argv[1] if len(argv) > 1 and argv[0] == "eval" else None
    return found.select(algos[-1] if algos else None, run_dir=run_dir,
                        recipes=_flag_values(argv, "--recipe") + _flag_values(argv, "--config"),
                        env=envs[-1] if envs else None)


def _algorithms_text(found: Plugins) -> str:
    parts = [f"{', '.join(f.algos)} ({f.name}{'' if f.algos[0] == 'ppo' else f'; dapo run --algo {f.example} --help'})"
             for f in found.families]
    missing = "".join(f" [{m} unavailable: {why}]" for m, why in found.unavailable.items())
    return "Algorithms: " + "; ".join(parts) + "." + missing


def build_parser(family: Family, found: Plugins, command: Optional[str] = None) -> OneLineParser:
    """The ``dapo`` parser with ``family``'s ``dapo run`` options.  ``command``: only that subcommand gets its options
    (the others are listed by name and help), so that ``dapo --help`` or ``dapo eval ...`` builds no run options and
    imports no extension (nor torch); None: every subcommand gets them (docs/options.md)."""
    def full(name: str) -> bool:
        return command is None or command == name

    parser = OneLineParser(prog="dapo", description="DAPO toolkit: " + _algorithms_text(found),
                           formatter_class=CompactHelp)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    names = {f.name for f in dataclasses.fields(family.config_class)}
    usage = RUN_USAGE.format(ext=" [--ext NAME [K=V ...]]" if "extensions" in names else "")
    run = sub.add_parser("run", help="train one experiment (default: DAPO on CartPole-v1)", usage=usage,
                         formatter_class=CompactHelp, description=_run_description(family, found))
    if full("run"):
        add_run_options(run, family, resume=True)
    _add_tune_parser(sub, family, full("tune"))
    ev = sub.add_parser("eval", help="evaluate a saved run", formatter_class=CompactHelp,
                        description="Roll out a saved run's policy (with its saved observation normaliser) and print "
                                    "the mean and sample std of the returns.")
    if full("eval"):
        _add_eval_arguments(ev)
    for extra in found.commands:
        if not extra.raw and full(extra.name):
            extra.add_arguments(sub.add_parser(extra.name, help=extra.help, formatter_class=CompactHelp))
        else:
            sub.add_parser(extra.name, help=extra.help, add_help=False)
    return parser


def _add_eval_arguments(ev: argparse.ArgumentParser) -> None:
    ev.add_argument("run_dir", type=Path, help="Run directory written by 'dapo run'")
    ev.add_argument("--episodes", type=int, default=None,
                    help="Episodes to run [10; grpo-lm/dapo-lm: held-out problems, the run's --eval-problems]")
    ev.add_argument("--seed", type=int, default=12345,
                    help="Seed of the evaluation envs [12345; the run's own evaluation in summary.json used its "
                         "--seed + 10000, so the two see other episodes]")
    ev.add_argument("--device", default="cpu", help="auto, cpu, cuda or cuda:N [cpu]")
    ev.add_argument("--stochastic", action=argparse.BooleanOptionalAction, default=None,
                    help="Sample actions instead of taking the mean/argmax [on if the run's eval_deterministic is "
                         "off]")
    ev.add_argument("--video", type=Path, default=None, metavar="DIR",
                    help="Record every episode into DIR (created if missing): MP4 with moviepy or imageio-ffmpeg "
                         "installed, else GIF (Gymnasium and PettingZoo runs)")
    ev.add_argument("--trust-env", action="store_true", help=TRUST_HELP)


def add_run_options(parser: argparse.ArgumentParser, family: Family, resume: bool) -> None:
    """The ``dapo run`` options of ``family`` (``dapo tune`` takes them as the base of its trials)."""
    names = {f.name for f in dataclasses.fields(family.config_class)}
    groups = add_config_flags(parser, family.config_class, skip=("recipe", "extensions"))
    experiment = groups.get("experiment", parser)
    if "recipe" in names:
        experiment.add_argument("--recipe", action="append", metavar="NAME", default=None,
                                help="Apply a recipe: a shipped name (dapo recipes) or a YAML path; repeatable.")
    experiment.add_argument("--config", action="append", dest="recipe", metavar="FILE", default=None, help=CONFIG_HELP)
    if resume:
        experiment.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR", help=RESUME_HELP)
    experiment.add_argument("--trust-env", action="store_true", help=TRUST_HELP)
    if "extensions" in names:
        from core import extensions

        ext = parser.add_argument_group("extensions", "\n".join(extensions.help_lines()))
        ext.add_argument("--ext", nargs="+", action="append", metavar="NAME [K=V ...]", default=None, help=EXT_HELP)


TUNE_USAGE = "dapo tune SPACE --study-dir DIR [--n-trials N] [tune options] [dapo run options: the base]"
TUNE_DESCRIPTION = (
    "Search dapo run options with Optuna. SPACE is a YAML file of option: range (lr: {low: 1.0e-4, high: 3.0e-3, "
    "log: true}; num_epochs: {low: 2, high: 10}; hidden_sizes: {choices: [[64, 64], [256, 256]]}); the dapo run "
    "options given (--env, --algo, --total-steps, --recipe, ...) are the base of every trial. Trial N is a run "
    "directory, DIR/trials/NNNN; the study is DIR/study.db (SQLite): run the same command again to continue it, or "
    "in several processes at once to share it. After each trial: DIR/best_recipe.yaml (dapo run --recipe "
    "DIR/best_recipe.yaml), DIR/trials.csv, trials.md and trials.png. Needs optuna (pip install "
    "'dapo-toolkit[tune]').")


def _add_tune_parser(sub, family: Family, full: bool) -> None:
    tune = sub.add_parser("tune", help="search dapo run options with Optuna; the best trial becomes a recipe",
                          usage=TUNE_USAGE, formatter_class=CompactHelp,
                          description=textwrap.fill(TUNE_DESCRIPTION, 96))
    if not full:
        return
    from core.run.tune import TuneOptions

    tune.add_argument("space", type=Path, metavar="SPACE", help="YAML file: the searched options and their ranges")
    group = add_config_flags(tune, TuneOptions)["tune"]
    group.add_argument("--study-dir", type=Path, required=True, metavar="DIR",
                       help="The study's directory: study.db, trials/, best_recipe.yaml, trials.csv/.md/.png "
                            "(an existing study there continues)")
    add_run_options(tune, family, resume=False)


def _run_description(family: Family, found: Plugins) -> str:
    import textwrap

    text = (f"Train an agent. {_algorithms_text(found)} These are the {family.name} options. Unset ones come from "
            "recipes (the env family's, the algorithm's, then --recipe ones); config.yaml in the run directory "
            "records every resolved value. Full descriptions: docs/options.md; algorithms: docs/algorithms.md.")
    return textwrap.fill(text, 96)


def explicit_from_args(args: argparse.Namespace, names: set[str]) -> dict:
    """The options given on the command line (argparse left the others out)."""
    from core import extensions

    out = {k: v for k, v in vars(args).items() if k in names and v is not None}
    if getattr(args, "recipe", None):
        out["recipe"] = tuple(args.recipe)
    if getattr(args, "ext", None):
        specs: dict = {}
        for words in args.ext:  # repeated --ext NAME k=v accumulate; the recipes' options stay unless named
            for name, options in extensions.parse_cli(words).items():
                if (options is None) != (specs.get(name, options) is None):
                    raise ConfigError(f"--ext {name} is both turned off and given options; drop '--ext {name} off' "
                                      f"or the options")
                specs[name] = None if options is None else {**specs.get(name, {}), **options}
        out["extensions"] = specs
    return out


def _run(args, family: Family) -> int:
    from core.run import api

    names = {f.name for f in dataclasses.fields(family.config_class)}
    explicit = explicit_from_args(args, names - {"recipe", "extensions"})
    if args.resume is not None and ("recipe" in explicit or "extensions" in explicit):
        raise ConfigError("--recipe/--config/--ext cannot be combined with --resume; the run's own config.yaml is used")
    fam, cfg = api.resolve(explicit, args.resume, family, trust_env=args.trust_env)
    side = fam.run_side()
    summary = side.run(cfg, args.resume is not None)
    if summary is not None:  # None: a data-parallel rank other than 0
        from core.algo.health import event_lines

        print("\n".join([*event_lines(summary.get("health_event_log", [])), side.summary_line(summary)]))
    return 0


def _tune(args, family: Family) -> int:
    from core.run.tune import options_from_args, run_study

    names = {f.name for f in dataclasses.fields(family.config_class)}
    base = explicit_from_args(args, names - {"recipe", "extensions"})
    try:
        result = run_study(args.space, args.study_dir, base, family, options_from_args(args), args.trust_env)
    except (KeyboardInterrupt, RunInterrupted):
        print(f"interrupted: the study in {args.study_dir} stays; run the same dapo tune command to continue it",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if result.best_trial is None:
        print(f"study {args.study_dir}: no trial completed; see {args.study_dir}/trials.csv")
        return 0
    values = " ".join(f"{k}={v}" for k, v in result.best_params.items())
    print(f"study {args.study_dir}: best trial {result.best_trial}, {options_from_args(args).objective}"
          f" return {result.best_value:.4g} ({values}); table {args.study_dir}/trials.csv; train it with: dapo run "
          f"--recipe {result.best_recipe}")
    return 0


def _eval(args, family: Family) -> int:
    if args.episodes is not None and not 1 <= args.episodes <= 100_000:
        raise ConfigError(f"--episodes must be in 1 .. 100000, got {args.episodes}")
    if args.episodes is None:
        args.episodes = family.default_eval_episodes  # None: the family picks its own default
    if not 0 <= args.seed <= MAX_SEED:
        raise ConfigError(f"--seed must be in 0 .. {MAX_SEED}, got {args.seed}")
    check_device(args.device)
    deterministic = None if args.stochastic is None else not args.stochastic
    side = family.run_side()
    video = {}
    if args.video is not None:
        if not side.video:
            raise ConfigError(f"--video records the episodes of {GYM_RUNS} and PettingZoo runs; {args.run_dir} is a "
                              f"{family.name} run")
        from core.run.video import check_video_dir

        video = {"video_dir": check_video_dir(args.video)}
    returns = side.evaluate(args.run_dir, args.episodes, args.seed, args.device, deterministic,
                            trust_env=args.trust_env, **video)
    print(side.eval_line(returns))
    if video:
        print(f"videos: {args.video}{'' if str(args.video).endswith('/') else '/'}eval-episode-*")
    return 0


def _recipe_dirs(found: Plugins) -> list[tuple[Family, Path]]:
    """Each family with the folder of its shipped recipes."""
    return [(fam, Path(folder)) for fam in found.families if (folder := fam.recipes_dir) is not None]


class Recipes(Command):
    """``dapo recipes``: every family's shipped recipes, grouped by family; ``dapo recipes NAME`` shows one merged
    with its base recipes, checked against its family's options."""

    name = "recipes"
    help = "list the shipped recipes, or show one (dapo recipes NAME)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("name", nargs="?", help="A recipe to show with its base recipes merged in (any family's, "
                                                    "or a YAML path)")

    def run(self, args) -> int:
        from core.run import recipes

        found = plugins()
        dirs = _recipe_dirs(found)
        if args.name is None:
            listed = [(fam, recipes.describe([folder])) for fam, folder in dirs]
            width = max((len(name) for _, found_recipes in listed for name in found_recipes), default=0)
            for fam, found_recipes in listed:
                print(f"{fam.name} ({', '.join(fam.algos)}):")
                for name, description in found_recipes.items():
                    print(f"  {name:{width}s}  {description}")
            print("Apply one with: dapo run --recipe NAME (or a YAML path); show one with: dapo recipes NAME")
            return 0
        if recipes.is_path(args.name):
            fam = found.select(recipes=[args.name])
            matches = [(fam, next((d for f, d in dirs if f is fam), recipes.HERE))]
        else:
            matches = [(fam, folder) for fam, folder in dirs if (folder / f"{args.name}.yaml").is_file()]
        if not matches:
            names = ", ".join(name for _, folder in dirs for name in recipes.describe([folder]))
            raise ConfigError(f"unknown recipe '{args.name}'; shipped recipes: {names} (or give a path to a YAML file)")
        for fam, folder in matches:
            if len(matches) > 1:
                print(f"# {fam.name}")
            described = recipes.describe([folder]).get(args.name) if not recipes.is_path(args.name) else None
            if described:  # what the recipe is for, before the values it sets
                print(textwrap.indent(textwrap.fill(described, 110), "# "))
            print(yaml.safe_dump(recipes.load(args.name, fam.config_class, [folder]), sort_keys=False).rstrip())
        return 0


class Export(Command):
    """``dapo export RUN_DIR --onnx FILE [--stochastic]``."""

    name = "export"
    help = "write a saved run's policy as an ONNX file (Gymnasium runs)"

    def add_arguments(self, parser) -> None:
        parser.description = ("Write a saved run's acting policy (its observation normaliser folded in: raw "
                              "observations in, env actions out) as an ONNX file. " + GYM_RUNS.capitalize()
                              + " can be exported.")
        parser.add_argument("run_dir", type=Path, help="Run directory written by 'dapo run'")
        parser.add_argument("--onnx", type=Path, required=True, metavar="FILE",
                            help="The ONNX file to write (its folder must exist)")
        parser.add_argument("--stochastic", action="store_true",
                            help="Sample actions: the graph takes a second input 'noise' (Discrete: uniform (B,) in "
                                 "[0, 1); Box: standard normal (B, A)) [off: argmax / mean]")
        parser.add_argument("--trust-env", action="store_true", help=TRUST_HELP)

    def run(self, args) -> int:
        from core.run.api import _family_of_run
        from core.run.export import check_output

        fam = _family_of_run(args.run_dir)
        side = fam.run_side()
        if side.export is None:
            raise ConfigError(f"{args.run_dir} is a {fam.name} run, which cannot be exported; {GYM_RUNS} can")
        check_output(args.onnx)
        out = side.export(args.run_dir, args.onnx, not args.stochastic, trust_env=args.trust_env)
        print(f"wrote {out} ({'stochastic: inputs obs, noise' if args.stochastic else 'deterministic: input obs'}; "
              "output action)")
        return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else "dapo"
    try:
        found = plugins()
        raw = {c.name: c for c in found.commands if c.raw}
        if argv and argv[0] in raw:
            return raw[argv[0]].run(argv[1:]) or 0
        family = pick_family(argv, found) if argv and argv[0] in ("run", "eval", "tune") else found.select()
        args = build_parser(family, found, argv[0] if argv and not argv[0].startswith("-") else "").parse_args(argv)
        if args.command == "run":
            return _run(args, family)
        if args.command == "eval":
            return _eval(args, family)
        if args.command == "tune":
            return _tune(args, family)
        chosen = next(c for c in found.commands if c.name == args.command)
        return chosen.run(args) or 0
    except ConfigError as e:
        if int(os.environ.get("RANK", "0")) == 0:  # under torchrun every rank meets the same bad input: one line
            print(one_line(f"dapo {command}: error: {e}"), file=sys.stderr)
        return EXIT_USAGE
    except RecursionError:  # a parser met nesting its depth limits did not foresee: still one line
        print(f"dapo {command}: error: the input nests too deep to read; write flatter values", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        from core.run.rundir import os_error_line
        from core.training.checkpoint import disk_full_cause  # torch: imported once a command runs, not for --help

        full = disk_full_cause(e)
        if full is not None:
            print(one_line(f"dapo {command}: error: {full.strerror}; the last checkpoint is intact: free space, then "
                           "continue with dapo run --resume RUN_DIR"), file=sys.stderr)
        else:
            print(one_line(f"dapo {command}: error: {os_error_line(e)}"), file=sys.stderr)
        return EXIT_FAILED
    except RunInterrupted as e:
        print(f"interrupted: checkpoint saved; continue with: dapo run --resume {e.run_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("interrupted; the last checkpoint (if any) is intact", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
