"""Lazy package exports (PEP 562): a public name's module is imported on its first use, so that importing a package
(a family's registration, ``dapo --help``) imports no trainer and no torch."""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``; ``exports`` maps each public name to ``"module"`` (the same
    name there) or ``"module:attribute"``."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = exports[name].partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    return __getattr__
