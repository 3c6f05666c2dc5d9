"""Algorithm families and CLI commands, registered by the packages that provide them.

``core`` knows no package above it: each family (``core`` itself, ``dapo_ma``, ``dapo_dt``, ...) describes itself
in a :class:`Family` object, and other packages may add ``dapo`` subcommands (:class:`Command`).  They are found
(:func:`plugins`) through the ``dapo.plugins`` entry points of installed packages, in the ``family`` module of any
importable top-level package whose name starts with ``dapo_`` (source checkouts on PYTHONPATH), and in the modules
named by the ``DAPO_PLUGINS`` environment variable (comma-separated).  A plugin module exposes ``FAMILY`` and/or
``COMMANDS``.  Functions are named as ``"module:attribute"`` strings and imported when used, so listing the
algorithms for ``--help`` imports no trainer.
"""
from __future__ import annotations

import difflib
import importlib
import os
import pkgutil
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable, Optional

from core.config.options import ConfigError


def load_ref(ref: str) -> Any:
    """``"package.module:attribute"`` -> the attribute."""
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Family:
    """One config class and trainer serving several algorithms (an algorithm is a config)."""

    name: str
    """What it trains on, e.g. 'Gymnasium'."""
    algos: tuple[str, ...]
    config: str
    """The config dataclass, as 'module:Class'."""
    resolve: str
    """'module:function': (explicit options dict, trust_env=False) -> resolved config (core/config/trust.py)."""
    complete: str
    """'module:function': (saved config) -> the same config validated, for resume and eval."""
    run: str
    """'module:function': (config, resume: bool) -> summary dict (or None on non-main ranks)."""
    load_config: str
    """'module:function': (run_dir, trust_env=False) -> the saved config; an env that would import code named by
    config.yaml is refused unless trust_env (core/config/trust.py)."""
    evaluate: str
    """'module:function': (run_dir, episodes, seed, device, deterministic, trust_env=False) -> list of returns."""
    load: str
    """'module:function': (run_dir, device=, env=, trust_env=) -> agent (the Python API's load)."""
    summary_line: str
    """'module:function': (summary dict) -> one line printed after a run."""
    claims_env: Optional[str] = None
    """'module:function': (env string) -> True if the env belongs to this family (when no --algo is given)."""
    example: str = ""
    """An example --algo for this family's --help."""
    env_reference: str = "core.envs.make:env_reference"
    """'module:function': (a Python callable making an env) -> the env string recorded in config.yaml."""
    recipes: str = ""
    """'module:attribute': the folder of this family's shipped recipes (a Path), listed by 'dapo recipes'."""
    eval_line: Optional[str] = None
    """'module:function': (the values evaluate returned) -> the line 'dapo eval' prints (default: their mean and std
    as episode returns).  Such a family's evaluate gets ``episodes=None`` when --episodes is not given."""

    def get(self, what: str) -> Callable:
        return load_ref(getattr(self, what))


@dataclass(frozen=True)
class Command:
    """A ``dapo NAME ...`` subcommand: ``add_parser(subparsers)`` defines it, ``handler(args) -> exit code`` runs it;
    with ``raw=True`` the handler receives the remaining argv instead (it parses its own flags)."""

    name: str
    help: str
    add_parser: str = ""
    handler: str = ""
    raw: bool = False


@dataclass
class Plugins:
    families: list[Family] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # module -> why it could not be loaded

    def family_of(self, algo: str) -> Family:
        for fam in self.families:
            if algo in fam.algos:
                return fam
        names = self.all_algos()
        close = difflib.get_close_matches(algo, names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        missing = "".join(f"; {m} unavailable ({why})" for m, why in self.unavailable.items())
        raise ConfigError(f"unknown --algo '{algo}'; {hint}choose one of: {', '.join(names)}{missing}")

    def all_algos(self) -> list[str]:
        return [a for fam in self.families for a in fam.algos]

    def family_for_env(self, env: Any) -> Optional[Family]:
        for fam in self.families:
            if fam.claims_env and isinstance(env, str) and fam.get("claims_env")(env):
                return fam
        return None


def _candidate_modules() -> list[str]:
    found = ["core.run.family"]
    try:
        found += [ep.value for ep in entry_points(group="dapo.plugins")]
    except Exception:  # a broken installation's metadata must not break the CLI
        pass
    found += [f"{m.name}.family" for m in pkgutil.iter_modules() if m.name.startswith("dapo_") and m.ispkg]
    found += [m.strip() for m in os.environ.get("DAPO_PLUGINS", "").split(",") if m.strip()]
    return list(dict.fromkeys(found))  # ordered, without duplicates


_CACHE: Optional[Plugins] = None


def plugins() -> Plugins:
    """Every family and command found (cached for the process)."""
    global _CACHE
    if _CACHE is None:
        out = Plugins()
        for name in _candidate_modules():
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as e:
                if e.name != name:  # the plugin exists but needs a package that is missing
                    out.unavailable[name.removesuffix(".family")] = f"No module named {e.name!r}"
                continue
            except Exception as e:  # a plugin that fails must not break the others
                out.unavailable[name.removesuffix(".family")] = f"{type(e).__name__}: {e}"
                continue
            fam = getattr(module, "FAMILY", None)
            if fam is not None and fam.name not in {f.name for f in out.families}:
                out.families.append(fam)
            out.commands += [c for c in getattr(module, "COMMANDS", ()) if c.name not in {k.name for k in out.commands}]
        _CACHE = out
    return _CACHE
