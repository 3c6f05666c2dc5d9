"""Config dataclasses <-> command-line flags and YAML.

Every dataclass field becomes a ``--flag`` in the argparse group named by the ``# --- group`` comment above it;
its help is the first sentence of the field's docstring.  A ``# +Group`` line stands for the fields of a shared option
group the config inherits (core/config/groups.py), in that group's order.  Values from YAML (recipes, config.yaml) are checked
against the field types here.  Only flags given on the command line are returned (argparse SUPPRESS), so that
recipes and presets can fill the rest.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import inspect
import math
import re
import shutil
import sys
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from core.config.options import ConfigError, flag, shown

# Fields that may change when a run is resumed; everything else defines the run.
RESUMABLE_OVERRIDES = {"total_steps", "device", "progress", "progress_every_s", "tensorboard", "checkpoint_every_s",
                       "eval_episodes", "torch_threads"}
MAX_CONFIG_BYTES = 1_000_000  # a config or recipe is a few KB; refuse to read /dev/zero
MAX_NESTING = 32  # lists and mappings inside each other; parsers recurse once per level (RecursionError)
MAX_ITEMS = 10_000  # entries of one list option (hidden_sizes has at most 16)


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors as a single line on stderr and exits 2."""

    def error(self, message: str, prog: str = "") -> typing.NoReturn:
        prog = prog or self.prog
        print(f"{prog}: error: {message} (see {prog} --help)", file=sys.stderr)
        sys.exit(2)

    def parse_args(self, args=None, namespace=None):
        """argparse's, but unknown flags name the subcommand whose help lists the valid ones (``dapo run --help``)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}", _chosen(self, parsed).prog)
        return parsed

    def parse_known_args(self, args=None, namespace=None):
        """Read ``--flag -inf`` as ``--flag=-inf``: argparse takes a word starting with "-" that is not a plain
        number for an option, so the value would be missing."""
        words = []
        for word in sys.argv[1:] if args is None else args:
            if word in ("-inf", "-nan") and words and words[-1].startswith("--") and "=" not in words[-1]:
                words[-1] += "=" + word
            else:
                words.append(word)
        return super().parse_known_args(words, namespace)


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the subcommand ``parsed`` chose: ``dapo dataset info`` rather than ``dapo``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(parsed, action.dest, None) in action.choices:
            return _chosen(action.choices[getattr(parsed, action.dest)], parsed)
    return parser


class CompactHelp(argparse.RawDescriptionHelpFormatter):
    """Help that fits a screen per group: ``--[no-]flag`` for booleans, one metavar per option."""

    def __init__(self, prog: str):
        super().__init__(prog, max_help_position=30, width=shutil.get_terminal_size((100, 24)).columns - 2)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if isinstance(action, argparse.BooleanOptionalAction):
            return "--[no-]" + action.option_strings[0][2:]
        if action.option_strings and action.nargs != 0:
            return f"{action.option_strings[0]} {self._metavar_formatter(action, action.dest.upper())(1)[0]}"
        return super()._format_action_invocation(action)


@lru_cache(maxsize=None)
def field_docs(cls: type) -> tuple[dict[str, str], dict[str, str]]:
    """``(docs, groups)``: each field's docstring (the string literal after it) and its ``# --- group`` section, in
    the order the config lists them; a ``# +Group`` line lists an inherited option group's fields there.  A field a
    config declares again (a family default) keeps the group's docstring unless it brings its own."""
    source = inspect.getsource(cls)
    body = ast.parse(source).body[0].body
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    mixins = {base.__name__: base for base in cls.__mro__[1:] if dataclasses.is_dataclass(base)}
    groups, group = {}, "options"
    for line in source.splitlines():
        m = re.match(r"\s*# --- (\w[\w -]*)", line)  # "online fine-tuning", "dapo-dt"
        if m:
            group = m.group(1).strip()
        m = re.match(r"\s*# \+(\w+)\s*$", line)
        if m:
            mixin_docs, mixin_groups = field_docs(mixins[m.group(1)])
            docs.update({name: text for name, text in mixin_docs.items() if name not in docs})
            groups.update(dict.fromkeys(mixin_groups, group))
        m = re.match(r"\s{4}(\w+): ", line)
        if m and m.group(1) in docs:
            groups[m.group(1)] = group
    return docs, groups


def ordered_fields(cls: type) -> list[dataclasses.Field]:
    """The dataclass fields in the order the config lists them (:func:`field_docs`), not base classes first."""
    order = {name: i for i, name in enumerate(field_docs(cls)[1])}
    fields = dataclasses.fields(cls)
    return sorted(fields, key=lambda f: (order.get(f.name, len(order)), fields.index(f)))


_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|et al|vs|cf)|\.)$", re.IGNORECASE)  # before a non-final "."


def first_sentence(doc: str) -> str:
    """The text up to the first full stop that ends a sentence: followed by white space and then not by a lowercase
    letter or a digit, and not part of '..', 'e.g.', 'i.e.', 'et al.', 'vs.' or 'cf.'."""
    for m in re.finditer(r"\.\s+(?=\S)", doc):
        following = doc[m.end()]
        if not (following.islower() or following.isdigit() or _ABBREVIATION.search(doc[: m.start()])):
            return doc[: m.start() + 1]
    return doc


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
        if tp is int:  # '1e6' is a common way to write a step count
            value = float(text) if re.fullmatch(r"[0-9.]+[eE][+]?[0-9]+", text) else int(text)
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(text)
            return int(value)
        return tp(text)
    parse.__name__ = tp.__name__  # argparse names the type in its error messages
    return parse


def _default_text(value: Any) -> str:
    if isinstance(value, bool):
        return " [on]" if value else " [off]"
    if value is None or value == () or value == {}:
        return ""
    return f" [{' '.join(map(str, value)) if isinstance(value, tuple) else value}]"


def add_config_flags(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """One flag per field in its help group, defaulting to SUPPRESS so that only given flags are returned.
    Returns the argument groups by name (callers may add options to them)."""
    hints, (docs, field_groups) = typing.get_type_hints(cls), field_docs(cls)
    groups: dict[str, Any] = {}
    for f in ordered_fields(cls):
        if f.name in skip:
            continue
        group_name = field_groups.get(f.name, "options")
        if group_name not in groups:
            groups[group_name] = parser.add_argument_group(group_name)
        group = groups[group_name]
        tp, optional = _unwrap(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        kw: dict[str, Any] = {"default": argparse.SUPPRESS, "dest": f.name,
                              "help": (first_sentence(docs.get(f.name, "")) + _default_text(default)).replace("%", "%%")}
        name = flag(f.name)
        origin = typing.get_origin(tp)
        if tp is bool:
            group.add_argument(name, action=argparse.BooleanOptionalAction, **kw)
        elif origin is Literal:
            group.add_argument(name, choices=typing.get_args(tp), metavar="{" + ",".join(typing.get_args(tp)) + "}", **kw)
        elif origin is tuple:
            group.add_argument(name, nargs="+", type=_scalar_parser(typing.get_args(tp)[0], False), metavar="N", **kw)
        elif origin is dict:
            group.add_argument(name, type=_kwargs_argument, metavar="K=V", **kw)
        else:
            group.add_argument(name, type=_scalar_parser(tp, optional), metavar=tp.__name__.upper()[0], **kw)
    return groups


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


def _kwargs_argument(text: str) -> dict[str, Any]:
    """argparse type for ``--env-kwargs``: its own message instead of argparse's 'invalid value'."""
    try:
        return parse_kwargs_text(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


# --- YAML --------------------------------------------------------------------------------------------------------
def coerce(name: str, value: Any, tp: Any, where: str = "config") -> Any:
    """Check and convert one YAML value to the field's type."""
    inner, optional = _unwrap(tp)
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
        if name not in names:
            close = [PEER_NAMES[name]] if PEER_NAMES.get(name) in names else difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"{where}: unknown option {shown(str(key))}{hint}")
        out[name] = coerce(name, value, hints[name], where)
    return out


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
    resolution always sets (all but ``may_be_unset``)."""
    return ("env", "algo", *(f.name for f in dataclasses.fields(cls) if f.default is None and f.name not in may_be_unset))


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
