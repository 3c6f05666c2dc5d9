"""The reward of the generic-path benchmark (experiments/lm_generic_benchmark.py), written as a user would write one
for ``dapo run --reward experiments.lm_add_reward:reward`` or TRL's ``reward_funcs``: the prompts, the completions
and the row's ``answer`` column in, one float per completion out."""
from __future__ import annotations


def final_answer(completion: str) -> str:
    """The text after the last ``>`` (the worked answers end ``,>SUM``), stripped; empty when there is none."""
    head, sep, tail = completion.rpartition(">")
    return tail.strip() if sep else ""


def reward(prompts, completions, answer, **kwargs) -> list[float]:
    """+1 when the completion's final answer equals the row's ``answer`` (a string of digits), else -1."""
    return [1.0 if final_answer(c) == str(a) else -1.0 for c, a in zip(completions, answer)]
