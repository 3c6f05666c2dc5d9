"""Recipes: the toolkit's settings kept as data, in YAML files.

A recipe is a mapping ``option: value`` (``dapo run`` option names, written with ``-`` or ``_``) with two reserved
keys: ``description`` (one line) and ``base`` (a name or a list of names of recipes applied before this one).  The
option ``recipe`` (``--recipe`` in a ``--config`` file) names more recipes applied before this one, after ``base``.
A relative path in ``base`` or ``recipe`` is relative to the file that names it.
``extensions`` holds ``name: {option: value}`` (or ``name: null`` to remove one an earlier layer added).  A layer
changes only the extension options it names: ``kl_adaptive_lr: {target: 0.02}`` over an earlier layer's
``{target: 0.05, max_scale: 1.0}`` gives ``{target: 0.02, max_scale: 1.0}``; options no layer names take the
extension's defaults.  After ``null`` a later layer turns the extension on afresh, from its defaults.

A run's settings are layered, each layer winning over the ones before it (:func:`merge`): the config dataclass's
defaults, the env family's recipe (``classic``, ``continuous``, ``atari``, ``minigrid``: every algorithm gets it alike),
the algorithm's (``ppo``, ``grpo``, ``dapo``: the same on every env), the ``--recipe`` files in the order given, then
the options given explicitly.  Tuning of one algorithm for one kind of env is a recipe the user names, e.g.
``--recipe dapo-mujoco``; nothing attaches it by itself.  Recipes shipped with a package sit
beside its ``recipes/__init__.py``; a name with ``/`` or ending in ``.yaml``/``.yml`` is a path.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional

from core.config.parsing import coerce_mapping, read_yaml
from core.config.errors import ConfigError, shown

HERE = Path(__file__).parent
RESERVED = ("description", "base")
MAX_CHAIN = 16  # recipes applied through 'base' (or 'recipe') inside each other; the shipped ones use 2


def is_path(name: str) -> bool:
    return "/" in name or name.endswith((".yaml", ".yml"))


def find(name: str, dirs: Iterable[Path], near: Optional[Path] = None) -> Path:
    """The file of recipe ``name``: a path (relative to ``near``, the folder of the recipe naming it, if any), else
    ``<dir>/<name>.yaml`` in ``near`` or one of ``dirs``."""
    if is_path(name):
        path = Path(name).expanduser()
        path = near / path if near is not None and not path.is_absolute() else path
        name = str(path)
        if path.exists() and not path.is_file():
            raise ConfigError(f"recipe file {name} is not a file; give the path of a YAML file")
        if not path.is_file():
            raise ConfigError(f"recipe file {name} does not exist; give a path to a YAML file or a recipe name")
        return path
    searched = ([near] if near is not None else []) + list(dirs)
    for d in searched:
        if (d / f"{name}.yaml").is_file():
            return d / f"{name}.yaml"
    names = sorted({p.stem for d in dirs for p in d.glob("*.yaml")})
    raise ConfigError(f"unknown recipe '{name}'; shipped recipes: {', '.join(names)} (or give a path to a YAML file)")


def load(name: str, cls: type, dirs: Iterable[Path] = (HERE,), near: Optional[Path] = None,
         _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A recipe's option values with its ``base`` recipes merged under them, type-checked against ``cls``."""
    dirs = list(dirs)
    path = find(name, dirs, near)
    key = str(path.resolve())
    if key in _seen:
        raise ConfigError(f"recipe {path} includes itself through its 'base' recipes; remove the cycle")
    if len(_seen) >= MAX_CHAIN:
        raise ConfigError(f"recipe {_seen[0]} applies more than {MAX_CHAIN} recipes inside each other through 'base' "
                          f"(at {path}); flatten the chain")
    values = coerce_mapping(read_yaml(path), cls, f"recipe {path}", RESERVED)
    values.pop("description", None)
    base = values.pop("base", None) or []
    bases = [base] if isinstance(base, str) else base
    if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
        raise ConfigError(f"recipe {path}: 'base' must be a recipe name or a list of names, got {shown(base)}")
    bases += values.pop("recipe", ())  # a --config file's recipes: under its own values, as --recipe would be
    layers = [load(b, cls, dirs, path.parent, (*_seen, key)) for b in bases]
    return merge([*layers, values])


def merge_extensions(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """``after``'s extension options over ``before``'s, option by option; ``None`` (removed) replaces the entry."""
    out = dict(before)
    for name, options in after.items():
        if isinstance(options, dict) and isinstance(out.get(name), dict):
            out[name] = {**out[name], **options}
        elif options is True and name in out and out[name] is not None:  # 'on' keeps the options it has
            continue
        else:
            out[name] = options
    return out


def merge(layers: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Later layers win, option by option; ``extensions`` merge per extension and per extension option
    (:func:`merge_extensions`)."""
    out: dict[str, Any] = {}
    for layer in layers:
        for k, v in layer.items():
            if k == "extensions" and isinstance(out.get(k), dict) and isinstance(v, dict):
                out[k] = merge_extensions(out[k], v)
            else:
                out[k] = v
    return out


def describe(dirs: Iterable[Path] = (HERE,)) -> dict[str, str]:
    """``{name: description}`` of the recipes in ``dirs``."""
    out = {}
    for d in dirs:
        for path in sorted(d.glob("*.yaml")):
            raw = read_yaml(path)
            out.setdefault(path.stem, str(raw.get("description", "")) if isinstance(raw, dict) else "")
    return out


def given(explicit, cls: type) -> dict[str, Any]:
    """The options a caller gave: a dict without its ``None`` values (None means "not given"), or a config
    object's fields that differ from the dataclass defaults."""
    import dataclasses

    if isinstance(explicit, cls):
        default = cls()
        explicit = {f.name: getattr(explicit, f.name) for f in dataclasses.fields(cls)
                    if getattr(explicit, f.name) != getattr(default, f.name)}
    return {k: v for k, v in explicit.items() if v is not None}


def layered(explicit: dict[str, Any], cls: type, algos, shipped, dirs: Iterable[Path] = (HERE,)):
    """``(values, algo, user recipes)``: the shipped recipes ``shipped(algo)`` (names, least specific first), then the
    user's ``explicit["recipe"]`` files in order, then the explicit options, merged (:func:`merge`).  The algorithm
    is the explicit one, else the last user recipe's, else the dataclass default."""
    import difflib

    dirs = list(dirs)
    user = tuple(explicit.get("recipe", ()))
    user_values = [load(name, cls, dirs) for name in user]
    algo = explicit.get("algo") or next((v["algo"] for v in reversed(user_values) if "algo" in v), cls.algo)
    if algo not in algos:
        close = difflib.get_close_matches(algo, algos, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"unknown --algo '{algo}'; choose one of: {', '.join(algos)}{hint}")
    values = merge([*(load(name, cls, dirs) for name in shipped(algo)), *user_values,
                    {k: v for k, v in explicit.items() if k != "recipe"}, {"algo": algo}])
    return values, algo, user


def user_layer(explicit: dict[str, Any], cls: type, dirs: Iterable[Path] = (HERE,)) -> tuple[dict[str, Any], Optional[str]]:
    """The user's recipes merged in order with the explicit options on top: what names the env (and its kwargs) before
    the env family's recipes can be chosen.  Also the recipe file that set ``env`` (None when the env was given
    explicitly, unset, or set by a shipped recipe), whose env must be confirmed when it imports code (core/config/trust.py)."""
    user = tuple(explicit.get("recipe", ()))
    values = [load(name, cls, dirs) for name in user]
    source = None
    if "env" not in explicit:
        source = next((name for name, v in zip(reversed(user), reversed(values)) if "env" in v), None)
        source = source if source is not None and is_path(source) else None
    return merge([*values, {k: v for k, v in explicit.items() if k != "recipe"}]), source
