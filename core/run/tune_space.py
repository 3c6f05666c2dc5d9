"""The search space of ``dapo tune``: a YAML mapping of ``dapo run`` option names to ranges, checked against a family's
config class before anything is written.

    lr: {low: 1.0e-4, high: 3.0e-3, log: true}   # a float option: a float range (log: sampled on a log scale)
    num_epochs: {low: 2, high: 10}                # an int option: integers low .. high (both included)
    clip_eps: {low: 0.1, high: 0.3, step: 0.05}   # step: a grid
    hidden_sizes: {choices: [[64, 64], [256, 256]]}
    dynamic_sampling: {choices: [true, false]}    # choices: any option, values as in a recipe

The kind of a range follows the option's type (int or float); ``choices`` suit every option.  An unknown option
name or range key gets one line with a "did you mean" (:func:`core.config.parsing.check_known`), as recipe typos do.
Optuna is imported only by :meth:`Param.suggest`.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from core.config.errors import ConfigError, shown
from core.config.fields import unwrap_optional
from core.config.parsing import RESUMABLE_OVERRIDES, check_known, coerce, read_yaml, to_plain

RANGE_KEYS = ["low", "high", "log", "step"]
SPEC_KEYS = [*RANGE_KEYS, "choices"]
# options a study sets itself or that are not settings of one run: each trial has its own run directory
NOT_TUNABLE = {"run_dir": "each trial gets STUDY_DIR/trials/NNNN",
               "recipe": "give base recipes with --recipe; a space searches option values",
               "extensions": "turn extensions on with --ext or a base recipe"}
MAX_CHOICES = 1000
# how a run is shown or where it runs, not what it learns: left out of the best recipe and free to differ when a
# study is continued
NOT_IN_RECIPE = RESUMABLE_OVERRIDES - {"total_steps", "eval_episodes"}


@dataclass(frozen=True)
class Param:
    """One searched option: a numeric range (``low``..``high``, ``log`` scale or ``step`` grid; integers for an int
    option) or a list of ``choices``."""

    name: str
    low: Optional[float] = None
    high: Optional[float] = None
    log: bool = False
    step: Optional[float] = None
    integer: bool = False
    choices: Optional[tuple] = None

    def labels(self) -> list:
        """The choices as Optuna stores them: numbers, strings and booleans as they are, lists as YAML flow text."""
        return [c if c is None or isinstance(c, (bool, int, float, str)) else _flow(c) for c in self.choices or ()]

    def suggest(self, trial) -> Any:
        """The option value ``trial`` (an ``optuna.Trial``) draws."""
        if self.choices is not None:
            return self.value(trial.suggest_categorical(self.name, self.labels()))
        if self.integer:
            return trial.suggest_int(self.name, int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def value(self, stored: Any) -> Any:
        """An option value from the value Optuna stored for this parameter (a choice's label -> the choice)."""
        if self.choices is None:
            return int(stored) if self.integer else float(stored)
        return self.choices[self.labels().index(stored)]

    def corners(self) -> list:
        """The values at the edges of the range (every choice): each is checked before the study starts."""
        return list(self.choices) if self.choices is not None else [self.low, self.high]

    def spec(self) -> dict:
        """The range as a plain mapping, as the space file writes it (stored with the study, to compare on resume)."""
        if self.choices is not None:
            return {"choices": to_plain(list(self.choices))}
        out = {"low": self.low, "high": self.high}
        return {**out, **({"log": True} if self.log else {}), **({"step": self.step} if self.step else {})}


def _flow(value: Any) -> str:
    return yaml.safe_dump(to_plain(value), default_flow_style=True).strip()


def _number(value: Any, where: str, key: str, integer: bool) -> Union[int, float]:
    if isinstance(value, str):  # YAML 1.1 reads 1e-4 (no dot) as a string
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
            float("inf"), float("-inf")):
        raise ConfigError(f"{where}: '{key}' must be a finite number, got {shown(value)}")
    if integer:
        if float(value) != int(value):
            raise ConfigError(f"{where}: '{key}' must be an integer (the option is an int), got {shown(value)}")
        return int(value)
    return float(value)


def parse_param(name: str, raw: Any, hint: Any, where: str) -> Param:
    """One entry of a space: ``raw`` (the mapping the file gives) for the option ``name`` of type ``hint``."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: give a mapping such as {{low: 0.0001, high: 0.01, log: true}} or "
                          f"{{choices: [a, b]}}, got {shown(raw)}")
    keys = [check_known(str(k), SPEC_KEYS, f"{where}: range key") for k in raw]
    if "choices" in keys:
        if set(keys) != {"choices"}:
            raise ConfigError(f"{where}: give either choices or low/high (with log or step), not both")
        choices = raw["choices"]
        if not isinstance(choices, list) or not choices or len(choices) > MAX_CHOICES:
            raise ConfigError(f"{where}: choices must be a list of 1 to {MAX_CHOICES} values, got {shown(choices)}")
        values = tuple(coerce(name, c, hint, where) for c in choices)
        if len(set(map(_flow, values))) != len(values):
            raise ConfigError(f"{where}: choices repeat a value; list each once")
        return Param(name, choices=values)
    tp, _ = unwrap_optional(hint)
    if tp not in (int, float) or typing.get_origin(tp) is not None:
        kind = "a switch" if tp is bool else "not a number"
        raise ConfigError(f"{where}: the option is {kind}; give its values as choices: [...]")
    missing = [k for k in ("low", "high") if k not in raw]
    if missing:
        raise ConfigError(f"{where}: '{missing[0]}' is missing; a range needs low and high")
    integer = tp is int
    low, high = (_number(raw[k], where, k, integer) for k in ("low", "high"))
    log = raw.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"{where}: 'log' must be true or false, got {shown(log)}")
    step = None if raw.get("step") is None else _number(raw["step"], where, "step", integer)
    if not low < high:
        raise ConfigError(f"{where}: low ({low}) must be below high ({high})")
    if log and low <= 0:
        raise ConfigError(f"{where}: a log range needs low > 0, got {low}")
    if step is not None and (step <= 0 or log):
        raise ConfigError(f"{where}: step must be > 0 and cannot go with log: true, got {step}")
    return Param(name, low, high, log, step, integer)


def load_space(space: Union[str, Path, dict], cls: type) -> list[Param]:
    """The searched options of ``space`` (a YAML file, or the same mapping as a dict) for the config class ``cls``, in
    the order given; every bad entry: one line naming the file and the option."""
    source = "space" if isinstance(space, dict) else f"space {space}"
    raw = space if isinstance(space, dict) else read_yaml(Path(space))
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{source} must be a mapping of option: range (e.g. lr: {{low: 0.0001, high: 0.01, log: "
                          f"true}}), got {shown(raw)}")
    hints, names = typing.get_type_hints(cls), [f.name for f in dataclasses.fields(cls)]
    params = []
    for key, spec in raw.items():
        name = check_known(str(key), names, source)
        if name in NOT_TUNABLE:
            raise ConfigError(f"{source}: '{key}' cannot be searched: {NOT_TUNABLE[name]}")
        params.append(parse_param(name, spec, hints[name], f"{source}: {key}"))
    if len({p.name for p in params}) != len(params):
        raise ConfigError(f"{source} names an option twice (once with '-', once with '_'); give each once")
    return params
