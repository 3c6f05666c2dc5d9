"""Config dataclasses as command-line flags: one ``--flag`` per field in the argparse group named by the ``# --- group``
comment above it, its help the first sentence of the field's docstring.  Only flags given on the command line are
returned (argparse SUPPRESS), so that recipes and presets can fill the rest; bad input ends in one line, exit 2."""
from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import sys
import typing
from functools import lru_cache
from typing import Any, Literal

from core.config.fields import unwrap_optional, field_docs, first_sentence, ordered_fields
from core.config.errors import ConfigError
from core.config.options import flag
from core.config.parsing import parse_kwargs_text


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
        tp, optional = unwrap_optional(hints[f.name])
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
            group.add_argument(name, nargs="+", type=_scalar_parser(typing.get_args(tp)[0], False), metavar="N",
                               action=_ListOnce, **kw)
        elif origin is dict:
            group.add_argument(name, type=_kwargs_argument, metavar="K=V", **kw)
        else:
            group.add_argument(name, type=_scalar_parser(tp, optional), metavar=tp.__name__.upper()[0], **kw)
    return groups


class _ListOnce(argparse.Action):
    """A list flag (``--reward A B``); given twice, argparse would silently keep the second list only: refused."""

    def __call__(self, parser, namespace, values, option_string=None):
        if hasattr(namespace, self.dest):  # the default is SUPPRESS: set only by an earlier use
            parser.error(f"{option_string} given twice; give all its values after one {option_string} "
                         f"(e.g. {option_string} A B)")
        setattr(namespace, self.dest, values)


def _kwargs_argument(text: str) -> dict[str, Any]:
    """argparse type for ``--env-kwargs``: its own message instead of argparse's 'invalid value'."""
    try:
        return parse_kwargs_text(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
