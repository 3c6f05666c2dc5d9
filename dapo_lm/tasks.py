"""Tasks generated and verified locally: a prompt, a worked answer for the warm start, a verifier for RL.

- ``add``: multi-digit addition (operands of 1-4 digits) with a written scratchpad, one column per step from the
  right with its carry: ``95+7=`` -> ``5+7+0=12,9+0+1=10,>102``.
- ``mul``: a 1-4 digit number times one digit, the same way: ``347*8=`` -> ``7*8+0=56,4*8+5=37,3*8+3=27,>2776``.
- ``countdown``: reach the target from four numbers 1-9, each used once, with + - *: ``3,5,7,2>34:`` ->
  ``5*7=35,3-2=1,35-1=34``.  Any valid derivation counts; the worked example is the one the generator drew.

Answers vary in length (operand sizes, carries, derivations), so how a loss weighs long against short answers
matters.  Held-out problems are those whose prompt hashes to 0 mod 10 (:func:`is_heldout`): training never draws
them, evaluation only draws them.  The verifier reads the final answer only (an outcome reward, as in DAPO).
"""
from __future__ import annotations

import abc
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np


@dataclass(frozen=True)
class Problem:
    prompt: str
    answer: str
    """A correct worked answer (the warm start's target; empty for the user's prompts)."""
    columns: dict[str, Any] = field(default_factory=dict)
    """The row's other columns, passed on to the reward (the user's prompts; none for the built-in tasks)."""


def is_heldout(prompt: str) -> bool:
    """A fixed tenth of all prompts, by a hash that does not depend on the run (CRC-32)."""
    return zlib.crc32(prompt.encode()) % 10 == 0


def column_steps(a: int, b: int, op: str) -> str:
    """The scratchpad of ``a op b`` (``op`` '+' or '*' with a one-digit ``b``): one step per column of ``a``."""
    da = [int(d) for d in reversed(str(a))]
    db = [int(d) for d in reversed(str(b))] if op == "+" else []
    steps, carry = [], 0
    for i in range(max(len(da), len(db))):
        x = da[i] if i < len(da) else 0
        if op == "+":
            y = db[i] if i < len(db) else 0
            s = x + y + carry
            steps.append(f"{x}+{y}+{carry}={s}")
        else:
            s = x * b + carry
            steps.append(f"{x}*{b}+{carry}={s}")
        carry = s // 10
    result = a + b if op == "+" else a * b
    return ",".join(steps) + f",>{result}"


class Task(abc.ABC):
    name = ""
    max_new_tokens = 48
    """Default response limit L_max (tokens, EOS included)."""
    overlong_buffer = 8
    """Default soft-penalty buffer: the penalty rises over the last this many tokens before L_max."""

    @abc.abstractmethod
    def draw(self, rng: np.random.Generator) -> Problem:
        """A random problem (training and held-out alike; :meth:`sample` splits them)."""

    @abc.abstractmethod
    def verify(self, prompt: str, response: str) -> bool:
        """Whether ``response`` answers ``prompt`` correctly."""

    def sample(self, rng: np.random.Generator, heldout: bool = False) -> Problem:
        """A problem from the training (or the held-out) part."""
        while True:
            p = self.draw(rng)
            if is_heldout(p.prompt) == heldout:
                return p

    def heldout_set(self, n: int, seed: int = 12345) -> list[Problem]:
        """``n`` distinct held-out problems, the same for every run of the task (or all there are)."""
        rng, seen, out = np.random.default_rng(seed), set(), []
        for _ in range(200 * n):
            p = self.sample(rng, heldout=True)
            if p.prompt not in seen:
                seen.add(p.prompt)
                out.append(p)
                if len(out) == n:
                    break
        return out


def _final_int(response: str) -> Optional[int]:
    m = re.fullmatch(r".*>(\d{1,12})", response, re.S)
    return int(m.group(1)) if m else None


def _operands(rng: np.random.Generator, max_digits: int) -> int:
    digits = int(rng.integers(1, max_digits + 1))
    return int(rng.integers(10 ** (digits - 1) if digits > 1 else 0, 10**digits))


class Addition(Task):
    name, max_new_tokens, overlong_buffer = "add", 52, 8  # longest correct answer: 4*9 + 6 + EOS = 43 < 44

    def draw(self, rng):
        a, b = _operands(rng, 4), _operands(rng, 4)
        return Problem(f"{a}+{b}=", column_steps(a, b, "+"))

    def verify(self, prompt, response):
        a, b = (int(x) for x in prompt[:-1].split("+"))
        return _final_int(response) == a + b


class Multiplication(Task):
    name, max_new_tokens, overlong_buffer = "mul", 52, 8  # longest correct answer: 4*9 + 6 + EOS = 43 < 44

    def draw(self, rng):
        a, b = _operands(rng, 4), int(rng.integers(2, 10))
        return Problem(f"{a}*{b}=", column_steps(a, b, "*"))

    def verify(self, prompt, response):
        a, b = (int(x) for x in prompt[:-1].split("*"))
        return _final_int(response) == a * b


_OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}


class Countdown(Task):
    name, max_new_tokens, overlong_buffer = "countdown", 40, 8  # most derivations: 3 steps of <= 9 + EOS < 32
    n_numbers = 4

    def draw(self, rng):
        numbers = [int(x) for x in rng.integers(1, 10, self.n_numbers)]
        pool, steps = list(numbers), []
        while len(pool) > 1:  # combine two random numbers of the pool until one is left
            i, j = (int(k) for k in rng.choice(len(pool), 2, replace=False))
            x, y = pool[i], pool[j]
            op = str(rng.choice(["+", "-", "*"]))
            if op == "-" and x < y:
                x, y = y, x
            z = _OPS[op](x, y)
            steps.append(f"{x}{op}{y}={z}")
            pool = [v for k, v in enumerate(pool) if k not in (i, j)] + [z]
        return Problem(",".join(map(str, numbers)) + f">{pool[0]}:", ",".join(steps))

    def verify(self, prompt, response):
        head, target = prompt[:-1].split(">")
        pool = [int(x) for x in head.split(",")]
        steps = response.split(",")
        if len(steps) != len(pool) - 1:
            return False
        for step in steps:
            m = re.fullmatch(r"(\d{1,6})([+*-])(\d{1,6})=(\d{1,7})", step)
            if m is None:
                return False
            x, op, y, z = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
            for v in (x, y):
                if v not in pool:
                    return False
                pool.remove(v)
            if _OPS[op](x, y) != z:
                return False
            pool.append(z)
        return pool == [int(target)]


TASKS = {t.name: t for t in (Addition(), Multiplication(), Countdown())}
