"""Values as text: YAML files and config.yaml (size, nesting and type checked), ``key=value`` option text, the
conversion of each value to its field's type, and run configs read back from a run directory.  The fields' docs are
core/config/fields.py; the command-line flags core/config/flags.py."""
from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib
import math
import re
import typing
from pathlib import Path
from typing import Any, Literal, Optional

import yaml

from core.config.fields import ordered_fields, unwrap_optional
from core.config.groups import WANDB_FIELDS
from core.config.errors import ConfigError, shown

# Fields that may change when a run is resumed; everything else defines the run.
RESUMABLE_OVERRIDES = {"total_steps", "device", "progress", "progress_every_s", "tensorboard", "checkpoint_every_s",
                       "eval_episodes", "torch_threads", *WANDB_FIELDS}
MAX_CONFIG_BYTES = 1_000_000  # a config or recipe is a few KB; refuse to read /dev/zero
MAX_NESTING = 32  # lists and mappings inside each other; parsers recurse once per level (RecursionError)
MAX_ITEMS = 10_000  # entries of one list option (hidden_sizes has at most 16)


# --- key=value text (env kwargs, extension options) ------------------------------------------------------------
_KWARG = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_CLOSE = {"[": "]", "(": ")", "{": "}"}
_WORDS = {"true": True, "false": False, "none": None, "null": None}


def _plain(value: Any) -> bool:
    """Numbers, strings, booleans, None, and lists/tuples/string-keyed dicts of them (what config.yaml can hold)."""
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return value is None or isinstance(value, (bool, int, float, str))


def _literal(raw: str) -> Any:
    """A Python literal (no code runs), else a YAML flow value (``[a, b]``, ``{x: 1}``), else a number (``inf``),
    else the text itself."""
    if raw.lower() in _WORDS:
        return _WORDS[raw.lower()]
    check_nesting(raw, f"value {shown(raw)}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    else:
        if not _plain(value):
            raise ConfigError(f"{shown(raw)} is a {type(value).__name__}; values are numbers, strings, booleans, lists, "
                              "tuples or dicts")
        return value
    if raw and raw[0] in "[{":
        try:
            value = yaml.safe_load(raw)
            return value if _plain(value) else raw
        except (yaml.YAMLError, RecursionError, MemoryError):
            pass
    try:
        return float(raw)  # inf, nan: numbers, which the option's own check then judges
    except ValueError:
        return raw


def nesting_depth(text: str) -> int:
    """How deep brackets (``[``, ``{``, ``(``) nest in ``text`` outside quotes, and how deep a YAML block nests by
    indentation, counted in one pass without parsing (so that no parser meets a depth it would recurse into)."""
    depth = deepest = 0
    quote = None
    indents: list[int] = []
    for line in text.splitlines():
        stripped = line.lstrip(" -")
        if stripped and not stripped.startswith("#") and depth == 0 and quote is None:
            indent = len(line) - len(stripped)
            while indents and indents[-1] >= indent:
                indents.pop()
            indents.append(indent)
            deepest = max(deepest, len(indents) - 1 + line[:indent].count("-"))
        for ch in line:
            if quote:
                quote = None if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch in "[{(":
                depth += 1
                deepest = max(deepest, depth + len(indents) - 1)
            elif ch in "]})":
                depth = max(depth - 1, 0)
        quote = None if quote == "'" and depth == 0 else quote
    return deepest


def check_nesting(text: str, what: str) -> None:
    """One line for ``text`` nested deeper than :data:`MAX_NESTING`."""
    if len(text) > MAX_NESTING and nesting_depth(text) > MAX_NESTING:
        raise ConfigError(f"{what} nests lists or mappings more than {MAX_NESTING} deep; write a flatter value")


def load_yaml_text(text: str, where: str) -> Any:
    """``yaml.safe_load`` with its failures as one line: malformed YAML, nesting deeper than :data:`MAX_NESTING`
    (checked before parsing; a RecursionError is caught too), or a list of more than :data:`MAX_ITEMS` entries."""
    check_nesting(text, where)
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark else ""
        raise ConfigError(f"{where} is not valid YAML{line}; fix the syntax") from e
    except RecursionError as e:
        raise ConfigError(f"{where} nests lists or mappings more than {MAX_NESTING} deep; write a flatter value") from e
    return value


def split_top_level(text: str) -> list[str]:
    """``text`` cut at the spaces and commas outside brackets and quotes; one-line errors for unbalanced ones."""
    tokens, current, stack, quote = [], "", [], None
    fix = "close each bracket and quote, e.g. 'sizes=[64,64] name=\"a b\"'"
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"" and (not current or current[-1] in "=[({,: "):
            quote = ch
        elif ch in _CLOSE:
            stack.append(_CLOSE[ch])
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                raise ConfigError(f"unbalanced '{ch}' in {shown(text)}; {fix}")
        elif (ch.isspace() or ch == ",") and not stack:
            tokens.append(current)
            current = ""
            continue
        current += ch
    if quote:
        raise ConfigError(f"unclosed quote {quote} in {shown(text)}; {fix}")
    if stack:
        raise ConfigError(f"unclosed bracket (no '{stack[-1]}') in {shown(text)}; {fix}")
    return [t for t in [*tokens, current] if t]


def parse_kwargs_text(text, example: str = "'size=5 max_steps=100'") -> dict[str, Any]:
    """``"N=3 sizes=[64,64] name='a b' continuous_actions=True"`` -> ``{"N": 3, "sizes": [64, 64], ...}``; a list
    of words is joined by spaces first.

    Pairs are separated by spaces or commas outside brackets and quotes.  Values are Python literals (numbers,
    booleans, quoted strings, tuples, lists and dicts of them; ``true``/``false``/``none`` too) or YAML flow
    collections (``[a, b]``, ``{x: 1}``); anything else is kept as a string.  Raises :class:`ConfigError` on a pair
    that is not ``key=value`` (``example`` shows the form) or on unbalanced brackets or quotes."""
    out: dict[str, Any] = {}
    for token in split_top_level(text if isinstance(text, str) else " ".join(text)):
        m = _KWARG.match(token)
        if m is None:
            raise ConfigError(f"{shown(token)} is not key=value; write e.g. {example} (quote a value with spaces: "
                              "name='a b')")
        key, raw = m.groups()
        if key in out:
            raise ConfigError(f"'{key}' is set twice; give each key once")
        out[key] = _literal(raw)
    return out


# --- YAML --------------------------------------------------------------------------------------------------------
def coerce(name: str, value: Any, tp: Any, where: str = "config") -> Any:
    """Check and convert one YAML value to the field's type."""
    inner, optional = unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{where}: '{name}' may not be null")
    origin = typing.get_origin(inner)
    if origin is Literal:
        if value not in typing.get_args(inner):
            raise ConfigError(f"{where}: '{name}' must be one of {typing.get_args(inner)}, got {shown(value)}")
        return value
    if origin is tuple:
        item = typing.get_args(inner)[0]
        values = [value] if isinstance(value, (int, str)) and item is not int else value
        if isinstance(values, (list, tuple)) and len(values) > MAX_ITEMS:
            raise ConfigError(f"{where}: '{name}' has {len(values)} entries; at most {MAX_ITEMS}")
        if not isinstance(values, (list, tuple)) or not all(isinstance(v, item) and not isinstance(v, bool)
                                                            for v in values):
            raise ConfigError(f"{where}: '{name}' must be a list of {item.__name__}s, got {shown(value)}")
        return tuple(values)
    if origin is dict:
        if isinstance(value, str):
            return parse_kwargs_text(value)
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ConfigError(f"{where}: '{name}' must be a mapping of name: value, got {shown(value)}")
        return dict(value)
    ok = {bool: isinstance(value, bool), int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool), str: isinstance(value, str)}
    if not ok.get(inner, False):
        raise ConfigError(f"{where}: '{name}' must be {inner.__name__}, got {shown(value)}")
    return inner(value)


def read_yaml(path: Path) -> Any:
    """A YAML file's content, with one-line errors for unreadable, oversized, binary or malformed files."""
    path = Path(path)
    try:
        if not path.is_file():
            raise ConfigError(f"{path} is not a file; pass the path of a YAML file")
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes; a config is a short YAML mapping")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text (byte {e.start}); save it as UTF-8 YAML") from e
    return load_yaml_text(text, str(path))


# Option names of Stable-Baselines3 and CleanRL that users type by habit -> ours (for the "did you mean" hint)
PEER_NAMES = {"learning_rate": "lr", "n_steps": "num_steps", "n_epochs": "num_epochs", "update_epochs": "num_epochs",
              "n_envs": "num_envs", "total_timesteps": "total_steps", "clip_range": "clip_eps", "clip_coef": "clip_eps",
              "clip_range_vf": "clip_value", "normalize_advantage": "norm_adv", "num_minibatch": "num_minibatches",
              "batch_size": "num_minibatches", "anneal_learning_rate": "anneal_lr"}


def coerce_mapping(raw: Any, cls: type, where: str, reserved: tuple[str, ...] = ()) -> dict[str, Any]:
    """Field values from a YAML mapping (keys with dashes or underscores), type-checked; ``reserved`` keys pass
    through unchecked."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping of option: value, got {type(raw).__name__}")
    hints, names = typing.get_type_hints(cls), [f.name for f in dataclasses.fields(cls)]
    out = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name in reserved:
            out[name] = value
            continue
        check_known(str(key), names, where)
        out[name] = coerce(name, value, hints[name], where)
    return out


def check_known(key: str, names: list[str], where: str) -> str:
    """``key`` (dashes or underscores) as a field name of ``names``; an unknown one: one line with a "did you mean"
    (also for the option names of other libraries, :data:`PEER_NAMES`)."""
    name = key.replace("-", "_")
    if name not in names:
        close = [PEER_NAMES[name]] if PEER_NAMES.get(name) in names else difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"{where}: unknown option {shown(key)}{hint}")
    return name


def to_plain(value: Any) -> Any:
    """Tuples as lists, recursively (YAML-safe)."""
    if isinstance(value, (tuple, list)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def write_yaml_config(cfg: Any) -> str:
    values = dataclasses.asdict(cfg)
    return yaml.safe_dump(to_plain({f.name: values[f.name] for f in ordered_fields(type(cfg))}), sort_keys=False)


def required_fields(cls: type, may_be_unset: tuple[str, ...]) -> tuple[str, ...]:
    """Fields every saved config records: the env, the algorithm and every preset-filled field (default None) that
    resolution always sets (all but ``may_be_unset`` and the optional W&B names, which no recipe fills and which runs
    of earlier versions do not record)."""
    unset = {*may_be_unset, *WANDB_FIELDS}
    return ("env", "algo", *(f.name for f in dataclasses.fields(cls) if f.default is None and f.name not in unset))


def load_run_config(run_dir: Path, cls: type, translate=None, required: tuple[str, ...] = (),
                    imports_code=None, trust_env: bool = False):
    """The resolved config saved in ``run_dir/config.yaml``; ``translate`` maps options of older versions.  A field of
    ``required`` missing or null is refused, naming it; so is an env that ``imports_code`` unless ``trust_env``
    (core/config/trust.py): nothing is imported here."""
    from core.config.trust import check_env

    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no config.yaml); pass a directory written by 'dapo run'")
    raw = read_yaml(path)
    if isinstance(raw, dict) and translate is not None:
        raw = translate({str(k).replace("-", "_"): v for k, v in raw.items()}, f"{path}")
    values = coerce_mapping(raw, cls, str(path))
    missing = next((name for name in required if values.get(name) is None), None)
    if missing is not None:
        raise ConfigError(f"{path} lacks '{missing}' (or it is null), which every run records; restore the file from "
                          "a backup or start a new run")
    cfg = cls(**values)
    if imports_code is not None:
        check_env(cfg.env, str(path), trust_env, imports_code)
    return cfg


def is_finite_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def importable_name(obj: Any) -> Optional[str]:
    """``"module:qualname"`` when importing that gives back ``obj`` itself (so a run that names it can be reopened by
    another process), else None (a lambda, a local function, something of ``__main__``)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:  # noqa: BLE001 - not importable by that name
        return None
    return f"{module}:{qualname}" if found is obj else None
