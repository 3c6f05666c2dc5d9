"""Rewards of sequence generation: the user's functions (``--reward module:function[=weight]``) and the built-in tasks'
verifiers, through one path.

A reward function has the shape of TRL's ``reward_funcs``: ``fn(prompts=list[str], completions=list[str], **kw) ->
list[float]``, one float per completion; ``prompts`` repeats each row's prompt once per answer, and ``kw`` holds the
row's other columns (lists aligned with the completions) and ``truncated`` (list[bool]: no EOS within
--max-new-tokens).  A function without ``**kwargs`` gets only the arguments it names.  Several rewards add up with
their weights (default 1).  Which answers count as *correct* (DAPO's group filter keeps 0 < #correct < G; accuracy is
the share correct) is decided by one reward, the first or ``--correct-reward``: its own value (unweighted) at least
``--correct-threshold``, and the answer not truncated.  A built-in task (:mod:`dapo_lm.tasks`) is the same thing: a
prompt source and :func:`task_reward`, its verifier as +1 / -1, correct at >= 1.

Every failure is one :class:`RewardError` line (a :class:`ConfigError`): a module that does not import, a name that
is not a function, a call that raises, a wrong number of values, a value that is not a finite number.  The runner
calls the rewards once on a dry batch before anything is written (:meth:`Reward.dry_run`), so most of them stop a
run before it starts; one that fails later stops the run with a checkpoint (:meth:`dapo_lm.trainer.LMTrainer.train`).
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from core.config.errors import ConfigError, shown
from core.config.parsing import importable_name

LOCAL = "dapo-local/"  # rewards given as Python callables that cannot be imported by name (this process only)
LOCAL_REWARDS: dict[str, Callable] = {}
RESERVED = ("prompts", "completions", "truncated")  # keyword names of the call; a data column may not take them


class RewardError(ConfigError):
    """A reward that cannot be imported or called, or whose values are not one finite number per completion."""


@dataclass
class Term:
    name: str
    """The spec without its weight (``module:function``), as messages name it."""
    fn: Callable
    weight: float
    params: Optional[frozenset]
    """The keyword names ``fn`` takes (None: it takes ``**kwargs``, so everything)."""


def split_spec(spec: str) -> tuple[str, float]:
    """``module:function[=weight]`` -> (``module:function``, weight)."""
    if not isinstance(spec, str) or not spec.strip():
        raise RewardError(f"--reward must be 'module:function[=weight]', got {shown(spec)}")
    name, weight = spec, 1.0
    if re.fullmatch(r".+=[^=:/\\]+", spec):
        name, _, text = spec.rpartition("=")
        try:
            weight = float(text)
        except ValueError:
            raise RewardError(f"--reward {spec}: the weight '{text}' is not a number") from None
        if not math.isfinite(weight):
            raise RewardError(f"--reward {spec}: the weight must be a finite number, got {text}")
    return name, weight


def imports_code(spec: str) -> bool:
    """Whether making this reward imports a module the string names (a file naming it must then be trusted)."""
    return not split_spec(spec)[0].startswith(LOCAL)


def reference(fn: Callable) -> str:
    """The ``--reward`` string of a Python callable: ``module:qualname`` when that imports back to ``fn``, else a
    process-local name (a lambda, a local function, a function of ``__main__``)."""
    imported = importable_name(fn)
    if imported is not None:
        return imported
    qualname = getattr(fn, "__qualname__", "") or type(fn).__name__
    base = name = LOCAL + re.sub(r"[^\w.-]", "_", qualname)
    k = 1
    while LOCAL_REWARDS.get(name, fn) is not fn:  # another callable of that name (two lambdas): numbered
        k += 1
        name = f"{base}-{k}"
    LOCAL_REWARDS[name] = fn
    return name


def _module(name: str, spec: str):
    if name.endswith(".py"):  # a file: imported under its stem, without putting its folder on sys.path
        path = Path(name).expanduser()
        if not path.is_file():
            raise RewardError(f"--reward {spec}: no file {name}")
        loader_spec = importlib.util.spec_from_file_location(f"dapo_reward_{path.stem}", path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[loader_spec.name] = module
        loader_spec.loader.exec_module(module)
        return module
    return importlib.import_module(name)


def load_term(spec: str) -> Term:
    """One ``--reward`` spec as a :class:`Term`, or one line saying why not."""
    name, weight = split_spec(spec)
    if name.startswith(LOCAL):
        if name not in LOCAL_REWARDS:
            raise RewardError(f"reward {name} was a Python callable that cannot be imported by name (a lambda or a "
                              "local function); pass it again: dapo_lm.train(resume=run_dir, reward=fn) or "
                              "dapo_lm.load(run_dir, reward=fn)")
        return _term(name, LOCAL_REWARDS[name], weight)
    module_name, sep, attr = name.rpartition(":")
    if not sep or not module_name or not attr:
        raise RewardError(f"--reward {spec}: name a function as module:function (or path/to/file.py:function)")
    try:
        module = _module(module_name, spec)
    except RewardError:
        raise
    except ModuleNotFoundError as e:
        raise RewardError(f"--reward {spec}: cannot import '{module_name}' ({e}); put it on PYTHONPATH") from e
    except Exception as e:  # noqa: BLE001 - the user's module failed while importing: one line, named by its type
        raise RewardError(f"--reward {spec}: importing '{module_name}' failed: {type(e).__name__}: {e}") from e
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise RewardError(f"--reward {spec}: '{module_name}' has no function '{attr}'")
    return _term(name, fn, weight)


def _term(name: str, fn: Callable, weight: float) -> Term:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: give it everything
        return Term(name, fn, weight, None)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return Term(name, fn, weight, None)
    return Term(name, fn, weight, frozenset(sig.parameters))


def task_reward(task) -> Callable:
    """A built-in task's verifier as a reward: +1 for a verified answer, -1 otherwise (a truncated answer is never
    verified) -- DAPO's rule-based reward."""
    def verifier(prompts, completions, truncated, **_):
        return [1.0 if not cut and task.verify(p, c) else -1.0 for p, c, cut in zip(prompts, completions, truncated)]

    verifier.__qualname__ = f"{task.name}_verifier"
    return verifier


class Reward:
    """Weighted rewards and the rule for *correct*; ``score`` gives both for a batch of answers."""

    def __init__(self, terms: Sequence[Term], correct: int = 0, threshold: float = 1.0):
        self.terms, self.correct_index, self.threshold = list(terms), correct, threshold

    @classmethod
    def of_task(cls, task) -> "Reward":
        return cls([_term(f"{task.name} verifier", task_reward(task), 1.0)])

    @classmethod
    def load(cls, specs: Sequence[str], correct: Optional[str] = None, threshold: float = 1.0) -> "Reward":
        """The rewards ``specs`` (``module:function[=weight]``); ``correct`` names the one that decides correctness
        (its ``module:function`` or its function name; default the first)."""
        terms = [load_term(s) for s in specs]
        index = 0
        if correct is not None:
            hits = [i for i, t in enumerate(terms) if correct in (t.name, t.name.rpartition(":")[2])]
            if len(hits) != 1:
                raise RewardError(f"--correct-reward {correct} names {'none' if not hits else 'several'} of the "
                                  f"rewards ({', '.join(t.name for t in terms)})")
            index = hits[0]
        return cls(terms, index, threshold)

    @property
    def name(self) -> str:
        return " + ".join(t.name if t.weight == 1 else f"{t.weight:g} x {t.name}" for t in self.terms)

    def _call(self, term: Term, kwargs: dict, n: int) -> np.ndarray:
        args = kwargs if term.params is None else {k: v for k, v in kwargs.items() if k in term.params}
        try:
            out = term.fn(**args)
        except Exception as e:  # noqa: BLE001 - the user's function failed: one line naming it and its error
            first = (str(e).splitlines() or [""])[0][:200]
            raise RewardError(f"reward {term.name} raised {type(e).__name__}: {first}") from e
        try:
            values = [float(v) for v in out]
        except (TypeError, ValueError):
            raise RewardError(f"reward {term.name} must return a list of {n} floats, got {shown(out)}") from None
        if len(values) != n:
            raise RewardError(f"reward {term.name} returned {len(values)} values for {n} completions")
        bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
        if bad:
            raise RewardError(f"reward {term.name} returned a non-finite value ({values[bad[0]]}) for completion "
                              f"{bad[0]}; rewards must be finite numbers")
        return np.asarray(values, dtype=np.float64)

    def score(self, prompts: Sequence[str], completions: Sequence[str], truncated: Sequence[bool],
              columns: Optional[dict[str, list]] = None) -> tuple[np.ndarray, np.ndarray]:
        """``N`` answers -> (rewards ``(N,)`` float64, the weighted sum; correct ``(N,)`` bool)."""
        n = len(completions)
        kwargs = {**(columns or {}), "prompts": list(prompts), "completions": list(completions),
                  "truncated": [bool(t) for t in truncated]}
        raw = [self._call(t, kwargs, n) for t in self.terms]
        total = sum(t.weight * r for t, r in zip(self.terms, raw))
        correct = (raw[self.correct_index] >= self.threshold) & ~np.asarray(kwargs["truncated"], dtype=bool)
        return np.asarray(total, dtype=np.float64), correct

    def dry_run(self, problems: Sequence) -> None:
        """Call every reward once on up to two prompts, each with an empty and a one-character answer (a model can
        write both), so that a reward that raises or returns the wrong values stops the run before it starts."""
        rows = list(problems[:2])
        completions = ["", "0"] * len(rows)
        prompts = [p.prompt for p in rows for _ in range(2)]
        names = sorted({k for p in rows for k in p.columns})
        columns = {k: [p.columns.get(k) for p in rows for _ in range(2)] for k in names}
        try:
            self.score(prompts, completions, [False] * len(completions), columns)
        except RewardError as e:
            raise RewardError(f"{e} (on a dry call before the run: completions '' and '0' to the first prompts)") \
                from e.__cause__
