"""Algorithm families and CLI commands, registered by the packages that provide them.

``core`` knows no package above it: each family (``core`` itself, ``dapo_ma``, ``dapo_dt``, ...) is a class
implementing :class:`Family`, and other packages may add ``dapo`` subcommands (:class:`Command`).  They are found
(:func:`plugins`) through the ``dapo.plugins`` entry points of installed packages, in the ``family`` module of any
importable top-level package whose name starts with ``dapo_`` (source checkouts on PYTHONPATH), and in the modules
named by the ``DAPO_PLUGINS`` environment variable (comma-separated).  An entry point or a ``DAPO_PLUGINS`` item
names a module (which exposes ``FAMILY`` and/or ``COMMANDS``) or, as ``module:attribute``, a Family or Command class
or object.  A family imports its trainer and runner only in :meth:`Family.run_side`, so listing the algorithms for
``--help`` imports no trainer; the :class:`RunSide` it returns names the family's own functions, which an editor
can follow to the family's code.
"""
from __future__ import annotations

import difflib
import importlib
import os
import pkgutil
import types
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional, Protocol, Sequence, runtime_checkable

from core.config.errors import ConfigError
from core.config.parsing import read_yaml


def load_ref(ref: str) -> Any:
    """``"package.module:attribute"`` -> the attribute (``"package.module"`` -> the module)."""
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def returns_line(returns: Any) -> str:
    """The line ``dapo eval`` prints unless a family says otherwise: the returns' mean and sample std."""
    from core.run.evaluation import mean_std, number

    mean, std = mean_std(returns)
    episodes = f"{len(returns)} episode{'' if len(returns) == 1 else 's'}"
    return f"eval_return_mean {number(mean, '.2f')} eval_return_std {number(std, '.2f')} (sample std) over {episodes}"


@dataclass(frozen=True)
class RunSide:
    """What a family does with a run: resolve its options, train it, and load, evaluate and describe a saved one.

    :meth:`Family.run_side` imports its modules and builds this from their functions when a run is made or read, so
    listing the algorithms for ``--help`` imports no trainer, and an editor follows each field from the family's
    ``run_side`` to the family's code."""

    resolve: Callable[..., Any]
    """``(explicit, trust_env=False)``: explicit options (field -> typed value) -> the resolved config
    (core/config/trust.py for ``trust_env``)."""
    complete: Callable[[Any], Any]
    """A saved config validated and completed, for resume and eval."""
    run: Callable[[Any, bool], Optional[dict]]
    """``(cfg, resume)``: train (or continue) a resolved run: its summary (None on non-main data-parallel ranks)."""
    load_config: Callable[..., Any]
    """``(run_dir, trust_env=False)``: the saved config of ``run_dir``; an env that would import code named by
    config.yaml is refused unless ``trust_env``."""
    evaluate: Callable[..., Any]
    """``(run_dir, episodes, seed, device, deterministic, trust_env=False)``: evaluate a saved run: the values
    :attr:`eval_line` prints (episode returns by default)."""
    load: Callable[..., Any]
    """``(run_dir, device="cpu", env=None, trust_env=False)``: the trained agent of ``run_dir`` (the Python API's
    ``load``)."""
    summary_line: Callable[[dict], str]
    """The one line printed after a run."""
    eval_line: Callable[[Any], str] = returns_line
    """The line ``dapo eval`` prints."""
    export: Optional[Callable[..., Any]] = None
    """``(run_dir, path, deterministic=True, trust_env=False)``: write the run's acting policy as an ONNX file
    (``dapo export``); None: the family's runs cannot be exported."""
    video: bool = False
    """Whether :attr:`evaluate` takes ``video_dir=`` (``dapo eval --video DIR``) and records its episodes there."""


@runtime_checkable
class Family(Protocol):
    """One config class and trainer serving several algorithms (an algorithm is a config).

    A family states what ``--help``, ``dapo recipes`` and the choice of family need (cheap to import), and in
    :meth:`run_side` the rest.  A family class may subclass this protocol to inherit the optional members' defaults
    (:attr:`default_eval_episodes`, :attr:`recipes_dir`, :meth:`claims_env`, :meth:`env_reference`)."""

    name: ClassVar[str]
    """What it trains on, e.g. 'Gymnasium'."""
    algos: ClassVar[tuple[str, ...]]
    example: ClassVar[str]
    """An example --algo for this family's --help."""
    config_class: ClassVar[type]
    """The config dataclass (its fields are the ``dapo run`` flags)."""
    recipes_dir: ClassVar[Optional[Path]] = None
    """The folder of this family's shipped recipes, listed by ``dapo recipes`` (None: none)."""
    default_eval_episodes: ClassVar[Optional[int]] = 10
    """Episodes ``dapo eval`` runs without --episodes; None: :attr:`RunSide.evaluate` gets ``episodes=None`` (its
    own default)."""

    def run_side(self) -> RunSide:
        """The family's :class:`RunSide`, importing its runner and trainer (only when called)."""
        ...

    def claims_env(self, env: str) -> bool:
        """True if the env belongs to this family (used when no --algo is given)."""
        return False

    def env_reference(self, factory: Any) -> str:
        """A Python callable making an env -> the env string recorded in config.yaml."""
        from core.envs.make import env_reference

        return env_reference(factory)


@runtime_checkable
class Command(Protocol):
    """A ``dapo NAME ...`` subcommand: :meth:`add_arguments` defines its flags, :meth:`run` ``(args) -> exit code``
    runs it; with ``raw = True`` :meth:`run` receives the remaining argv instead (it parses its own flags)."""

    name: ClassVar[str]
    help: ClassVar[str]
    raw: ClassVar[bool] = False

    def add_arguments(self, parser: Any) -> None:
        """Add the command's flags to its ``argparse`` parser (not called for a raw command)."""

    def run(self, args: Any) -> Optional[int]:
        """Run the command: parsed ``args`` (or the argv after its name when ``raw``) -> exit code."""
        ...


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
            if isinstance(env, str) and fam.claims_env(env):
                return fam
        return None

    def family_named(self, name: str) -> Family:
        fam = next((f for f in self.families if f.name == name), None)
        if fam is None:
            raise ConfigError(f"unknown family '{name}'; families: {', '.join(f.name for f in self.families)}")
        return fam

    def select(self, algo: Optional[str] = None, *, run_dir: Any = None, recipes: Sequence[Any] = (),
               env: Any = None) -> Family:
        """The one family selection of the CLI and the API: by ``algo``, else by the algorithm recorded in
        ``run_dir``'s config.yaml, else in the last of the ``recipes`` files that records one, else the family that
        claims ``env``, else the Gymnasium family (the default algorithm's).  An unknown algorithm: one line
        listing all."""
        if algo is None and run_dir is not None:
            algo = recorded_algo(run_dir, inside_run_dir=True)
        if algo is None:
            algo = next((a for r in reversed(tuple(recipes)) if (a := recorded_algo(r))), None)
        if algo is not None:
            return self.family_of(algo)
        return self.family_for_env(env) or self.family_of(DEFAULT_ALGO)

    def add(self, obj: Any) -> None:
        """Register a Family or Command (a class is instantiated), or a module's ``FAMILY`` and ``COMMANDS``."""
        if isinstance(obj, type):
            obj = obj()
        if isinstance(obj, types.ModuleType):
            for item in (getattr(obj, "FAMILY", None), *getattr(obj, "COMMANDS", ())):
                if item is not None:
                    self.add(item)
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                self.add(item)
        elif hasattr(obj, "algos"):
            if obj.name not in {f.name for f in self.families}:
                self.families.append(obj)
        elif hasattr(obj, "run") and hasattr(obj, "name"):
            if obj.name not in {c.name for c in self.commands}:
                self.commands.append(obj)
        else:
            raise TypeError(f"{obj!r} is neither a Family nor a Command")


DEFAULT_ALGO = "dapo"  # TrainConfig.algo: the family of a command line naming no algorithm or claimed env


def _candidate_refs() -> list[str]:
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
        for ref in _candidate_refs():
            module = ref.partition(":")[0]
            label = module.removesuffix(".family")
            try:
                obj = load_ref(ref)
            except ModuleNotFoundError as e:
                if e.name != module:  # the plugin exists but needs a package that is missing
                    out.unavailable[label] = f"No module named {e.name!r}"
                continue
            except Exception as e:  # a plugin that fails must not break the others
                out.unavailable[label] = f"{type(e).__name__}: {e}"
                continue
            try:
                out.add(obj)
            except Exception as e:
                out.unavailable[label] = f"{type(e).__name__}: {e}"
        _CACHE = out
    return _CACHE


def recorded_algo(path: Any, inside_run_dir: bool = False) -> Optional[str]:
    """The ``algo`` written in a YAML file, or in a run directory's config.yaml (None if there is none or it is
    unreadable; a name that is not a path, such as a shipped recipe's, records none)."""
    path = None if path is None else str(path)
    if path is None or not (path.endswith((".yaml", ".yml")) or "/" in path or inside_run_dir):
        return None
    try:
        data = read_yaml(Path(path) / "config.yaml" if inside_run_dir else Path(path))
    except ConfigError:
        return None
    algo = data.get("algo") if isinstance(data, dict) else None
    return algo if isinstance(algo, str) else None
