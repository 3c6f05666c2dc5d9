"""Command-line flags and YAML files for :class:`TrainConfig`.

Every dataclass field becomes a ``--flag`` whose help text is the field's docstring.  Precedence:
dataclass defaults < ``--config FILE.yaml`` < explicit flags; ``None`` fields are filled later from
presets (see :func:`core.presets.resolve`).
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import inspect
import math
import sys
import typing
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml

from core.config import ConfigError, TrainConfig, flag, joint_grad_clip

# Fields that may change when a run is resumed; everything else defines the run.
RESUMABLE_OVERRIDES = {"total_steps", "device", "progress", "tensorboard", "checkpoint_every_s",
                       "eval_episodes", "torch_threads"}


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors as a single line on stderr and exits 2."""

    def error(self, message: str) -> typing.NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)

    def parse_known_args(self, args=None, namespace=None):
        """Read ``--log-std-min -inf`` as ``--log-std-min=-inf``: argparse takes a word starting with "-" that is not
        a plain number for an option, so the value would be missing."""
        words = []
        for word in sys.argv[1:] if args is None else args:
            if word == "-inf" and words and words[-1].startswith("--") and "=" not in words[-1]:
                words[-1] += "=-inf"
            else:
                words.append(word)
        return super().parse_known_args(words, namespace)


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (the string literal right after each field) of a dataclass."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """``Optional[X]`` -> ``(X, True)``."""
    if typing.get_origin(tp) is Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


def _scalar_parser(tp: Any, optional: bool):
    def parse(text: str):
        if optional and text.lower() == "none":
            return None
        return tp(text)
    parse.__name__ = tp.__name__  # argparse names the type in its error messages
    return parse


def add_config_flags(parser: argparse.ArgumentParser, cls: type = TrainConfig) -> None:
    """One flag per field, defaulting to SUPPRESS so that only explicitly given flags are returned."""
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    for f in dataclasses.fields(cls):
        tp, optional = _unwrap(hints[f.name])
        default = "preset" if f.default is None else f.default
        kw: dict[str, Any] = {"default": argparse.SUPPRESS, "dest": f.name,
                              "help": f"{docs.get(f.name, '')} (default: {default})".replace("%", "%%")}
        name = flag(f.name)
        if tp is bool:
            parser.add_argument(name, action=argparse.BooleanOptionalAction, **kw)
        elif typing.get_origin(tp) is Literal:
            parser.add_argument(name, choices=typing.get_args(tp), **kw)
        elif typing.get_origin(tp) is tuple:
            parser.add_argument(name, nargs="+", type=typing.get_args(tp)[0], metavar="N", **kw)
        else:
            parser.add_argument(name, type=_scalar_parser(tp, optional), metavar=tp.__name__.upper(), **kw)


def _coerce(name: str, value: Any, tp: Any) -> Any:
    """Check and convert one YAML value to the field's type."""
    inner, optional = _unwrap(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"config key '{name}' may not be null")
    if typing.get_origin(inner) is Literal:
        if value not in typing.get_args(inner):
            raise ConfigError(f"config key '{name}' must be one of {typing.get_args(inner)}, got {value!r}")
        return value
    if typing.get_origin(inner) is tuple:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) for v in value):
            raise ConfigError(f"config key '{name}' must be a list of integers, got {value!r}")
        return tuple(value)
    ok = {bool: isinstance(value, bool), int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool), str: isinstance(value, str)}
    if not ok.get(inner, False):
        raise ConfigError(f"config key '{name}' must be {inner.__name__}, got {value!r}")
    return inner(value)


def read_yaml_config(path: Path, cls: type = TrainConfig) -> dict[str, Any]:
    """Field values from a YAML mapping; keys may use dashes or underscores."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise ConfigError(f"config {path} is not valid YAML{where}; fix the syntax") from e
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config {path} must be a mapping of option: value, got {type(raw).__name__}")
    hints, names = typing.get_type_hints(cls), [f.name for f in dataclasses.fields(cls)]
    out = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"config {path}: unknown option '{key}'{hint}")
        out[name] = _coerce(name, value, hints[name])
    return out


def write_yaml_config(cfg: Any) -> str:
    d = dataclasses.asdict(cfg)
    return yaml.safe_dump({k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}, sort_keys=False)


# Options added after runs were recorded, or whose saved null meant "off" before a preset filled it, with the value
# that reproduces such a run (resume and eval must not hand it today's preset instead): runs from before
# --joint-grad-clip clipped as their optimisers implied; a saved `target_kl: null` ran without the KL rule; runs
# from before --critic-hidden-sizes had the actor's widths; runs from before a noise-floor shape flag had it off.
LEGACY_VALUES = {"collapse_confirm": lambda c: 0, "joint_grad_clip": joint_grad_clip,
                 "target_kl": lambda c: 0.0, "kl_lr_max_scale": lambda c: 10.0,
                 "critic_hidden_sizes": lambda c: tuple(c.hidden_sizes),
                 "log_std_min_anneal": lambda c: False, "log_std_min_anneal_start": lambda c: 0.0,
                 "log_std_min_anneal_end": lambda c: 1.0, "log_std_min_relative": lambda c: False}


def load_run_config(run_dir: Path, cls: type = TrainConfig):
    """The resolved config saved in ``run_dir/config.yaml`` (options it predates or left null: ``LEGACY_VALUES``)."""
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no config.yaml); pass a directory written by 'dapo run'")
    values = read_yaml_config(path, cls)
    cfg = cls(**values)
    names = {f.name for f in dataclasses.fields(cls)}
    return dataclasses.replace(cfg, **{k: legacy(cfg) for k, legacy in LEGACY_VALUES.items()
                                       if k in names and values.get(k) is None})


def build_config(flags: dict[str, Any], config_file: Optional[Path], resume_dir: Optional[Path],
                 cls: type = TrainConfig):
    """Merge defaults, an optional YAML file and explicit flags (or a resumed run's config)."""
    if resume_dir is not None:
        if config_file is not None:
            raise ConfigError("--config cannot be combined with --resume; the run's own config.yaml is used")
        frozen = sorted(set(flags) - RESUMABLE_OVERRIDES - {"run_dir"})
        if frozen:
            raise ConfigError(f"--{frozen[0].replace('_', '-')} cannot change when resuming; only "
                              f"{', '.join('--' + k.replace('_', '-') for k in sorted(RESUMABLE_OVERRIDES))} can")
        base = dataclasses.asdict(load_run_config(resume_dir, cls))
        if "log_std_min" in base and base["log_std_min"] is None:  # saved "no floor": the presets must not add one
            base["log_std_min"] = -math.inf
        return cls(**{**base, **flags, "run_dir": str(resume_dir)})
    values = read_yaml_config(config_file, cls) if config_file is not None else {}
    return cls(**{**values, **flags})
