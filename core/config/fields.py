"""The fields of a config dataclass read as documentation: each field's docstring (the help of its flag and its
line in docs/options.md), the ``# --- group`` comment above it, and the ``# +Group`` lines that place a shared option
group's fields (core/config/groups.py)."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import typing
from typing import Any, Union


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


_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|et al|vs|cf|dr)|\.)$", re.IGNORECASE)  # before a non-final "."


def first_sentence(doc: str) -> str:
    """The text up to the first full stop that ends a sentence: followed by white space and then not by a lowercase
    letter or a digit, and not part of '..', 'e.g.', 'i.e.', 'et al.', 'vs.' or 'cf.'."""
    for m in re.finditer(r"\.\s+(?=\S)", doc):
        following = doc[m.end()]
        if not (following.islower() or following.isdigit() or _ABBREVIATION.search(doc[: m.start()])):
            return doc[: m.start() + 1]
    return doc

def unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """``Optional[X]`` -> ``(X, True)``."""
    if typing.get_origin(tp) is Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False
