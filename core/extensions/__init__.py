"""Extensions: mechanisms beyond PPO, GRPO and DAPO as ``docs/algorithms.md`` defines them, one file each.

An extension is a class with a name, an ``Options`` dataclass (its settings, each with a docstring) and the hooks
the trainer calls (all optional): a multiplier on the policy learning rate, an anchor for the policy ratio of
stale data, a minibatch sampler in place of the trainer's, a step after each update, a phrase for the run's
settings line, and state for checkpoints.  A new
idea is one module in this package (found and registered on import) plus one line in a recipe::

    extensions:
      noise_floor: {log_std_min: -1.2}

From the command line: ``--ext noise_floor log_std_min=-1.2``; on an extension a recipe turned on, ``--ext`` sets
only the options it names (the recipe's others stay), and ``--ext NAME off`` removes it.
Fast paths declare what they support: an extension with ``numpy_update = False`` sends the update to torch.

Layer 4 of ``core``: may import ``core.config``, ``core.algo`` and ``core.envs``, not ``training`` or ``run``
(the trainer calls the hooks; an extension receives it as an argument).
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib
import pkgutil
import typing
from typing import Any, ClassVar, Optional

from core.config.parsing import coerce, parse_kwargs_text
from core.config.fields import field_docs, first_sentence
from core.config.errors import ConfigError

OFF = ("off", "none", "false")


class Extension:
    """Base class: the hooks the trainer calls, each a no-op here."""

    name: ClassVar[str]
    Options: ClassVar[type]
    numpy_update: ClassVar[bool] = True  # the NumPy update path supports this extension
    summary: ClassVar[str] = ""

    def __init__(self, options: Any, trainer: Any):
        self.options = options

    @classmethod
    def check(cls, options: Any, cfg: Any, action_space: Any) -> None:
        """Refuse (ConfigError) a config or env the extension cannot act on; runs before the run directory exists."""

    def describe(self) -> str:
        """A phrase for the run's settings line."""
        return self.name

    def policy_lr_scale(self) -> float:
        """Multiplier on the scheduled policy learning rate for the next update."""
        return 1.0

    def anchor(self, trainer: Any):
        """A :class:`core.algo.proximal.Proximal` to re-anchor the policy ratio on, or None."""
        return None

    def sampler(self, trainer: Any):
        """A minibatch sampler to use instead of the trainer's (the interface of :class:`core.algo.sampler.DynamicSampler`),
        or None."""
        return None

    def after_update(self, trainer: Any, metrics: dict[str, float]) -> dict[str, float]:
        """Called after each update (metrics averaged over data-parallel ranks); returns metrics to log."""
        return {}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


REGISTRY: dict[str, type[Extension]] = {}


def register(cls: type[Extension]) -> type[Extension]:
    """Class decorator: make an extension available by its ``name`` in recipes and ``--ext``."""
    REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def get(name: str) -> type[Extension]:
    if name not in REGISTRY:
        close = difflib.get_close_matches(name, list(REGISTRY), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(f"unknown extension '{name}'; {hint}available: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def resolve_options(name: str, given: Optional[dict]) -> dict[str, Any]:
    """The extension's full options (defaults filled, types checked) as a plain dict for config.yaml."""
    cls = get(name)
    given = dict(given or {})
    hints, fields = typing.get_type_hints(cls.Options), {f.name: f for f in dataclasses.fields(cls.Options)}
    out = {}
    for key in given:
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"extension {name}: unknown option '{key}'{hint} (options: {', '.join(fields)})")
    for key, f in fields.items():
        if key in given:
            out[key] = coerce(key, given[key], hints[key], f"extension {name}")
        elif f.default is not dataclasses.MISSING:
            out[key] = f.default
        else:
            raise ConfigError(f"extension {name} needs option '{key}': --ext {name} {key}=VALUE")
    options = cls.Options(**out)
    if hasattr(options, "validate"):
        options.validate()
    return out


def resolve(specs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{name: options or None}`` (None: removed) -> ``{name: full options}`` for the extensions that are on."""
    if not isinstance(specs, dict):
        raise ConfigError(f"extensions must be a mapping of name: options, got {specs!r}")
    out = {}
    for name, options in specs.items():
        if options is None or options is False:
            continue
        if options is True:
            options = {}
        if not isinstance(options, dict):
            raise ConfigError(f"extension {name}: options must be a mapping of option: value, got {options!r}")
        out[name] = resolve_options(name, options)
    return out


def parse_cli(words: list[str]) -> dict[str, Optional[dict]]:
    """``--ext NAME [key=value ...]`` words -> ``{NAME: {key: value}}``; ``NAME off`` -> ``{NAME: None}``."""
    name, rest = words[0], words[1:]
    get(name)
    if len(rest) == 1 and rest[0].lower() in OFF:
        return {name: None}
    first = next(iter(dataclasses.fields(get(name).Options)), None)
    example = f"'--ext {name} {first.name}={first.default}'" if first else f"'--ext {name}'"
    try:
        return {name: parse_kwargs_text(rest, example=example)}
    except ConfigError as e:
        raise ConfigError(f"--ext {name}: {e}") from e


def check_all(specs: dict[str, dict], cfg: Any, action_space: Any) -> None:
    """Every resolved extension's :meth:`Extension.check` against the config and the env's action space."""
    for name, options in specs.items():
        get(name).check(get(name).Options(**options), cfg, action_space)


def build(specs: dict[str, dict], trainer: Any) -> list[Extension]:
    """Instantiate the resolved extensions for ``trainer`` (each may refuse an env it cannot act on)."""
    return [get(name)(get(name).Options(**options), trainer) for name, options in specs.items()]


def help_lines() -> list[str]:
    """One line per extension for ``--help``: name, summary and options with defaults."""
    import textwrap

    lines = []
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        opts = " ".join(f"{f.name}={f.default}" for f in dataclasses.fields(cls.Options))
        lines += textwrap.wrap(f"{name}: {cls.summary} Options: {opts}", 96, subsequent_indent="    ")
    return lines


def option_docs(name: str) -> dict[str, str]:
    """Each option's docstring (for docs/options.md)."""
    return {k: first_sentence(v) for k, v in field_docs(get(name).Options)[0].items()}


_discover()
