"""Group-filter dynamic sampling (DAPO, Yu et al. 2025, section 3.2; docs/algorithms.md, section 8).

A prompt group whose ``G`` answers all get the same reward has zero group-relative advantage: it adds no gradient
but still dilutes the batch.  :class:`GroupFilter` keeps only groups with reward spread and generates further
rounds until the batch holds ``target`` groups.  Three things users of other libraries report going wrong are
handled here: float noise (a spread test with a tolerance, :func:`dapo_lm.losses.constant_groups`), data that are
too easy or too hard (after ``max_rounds`` rounds the batch is trained as it is, with one warning, never a crash),
and surplus groups of the last round (kept, oldest first, for the next batch instead of thrown away).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from torch import Tensor

from dapo_lm.losses import CONSTANT_ATOL, constant_groups


@dataclass
class Fill:
    """One batch: ``groups`` to train on, and what it took."""

    groups: list
    rounds: int
    """Generation rounds run for this batch (0 if the surplus alone filled it)."""
    generated: int
    """Groups generated in those rounds."""
    filtered: int
    """Of those, groups dropped for having no reward spread."""
    hit_cap: bool
    """True when ``max_rounds`` ran out before the batch was full (it is trained short)."""
    from_surplus: int
    """Groups taken from the previous batch's surplus."""


class GroupFilter:
    """Fill batches of ``target`` informative prompt groups.

    ``generate()`` returns ``(groups, rewards)``: a list of ``P`` groups (any objects) and their rewards ``(P, G)``.
    With ``enabled=False`` one round is generated and every group kept (GRPO).  ``max_surplus`` bounds the groups
    carried over (default ``target``); beyond it the oldest are dropped, as they are the most off-policy."""

    def __init__(self, target: int, max_rounds: int, enabled: bool = True, max_surplus: int | None = None,
                 atol: float = CONSTANT_ATOL):
        if target < 1 or max_rounds < 1:
            raise ValueError(f"target and max_rounds must be >= 1, got {target} and {max_rounds}")
        self.target, self.max_rounds, self.enabled, self.atol = target, max_rounds, enabled, atol
        self.max_surplus = target if max_surplus is None else max_surplus
        self.pending: list = []  # surplus groups, oldest first
        self.warned = False

    def informative(self, rewards: Tensor) -> list[bool]:
        """``(P, G)`` -> per group: has reward spread beyond float noise."""
        return (~constant_groups(rewards, self.atol)).tolist()

    def fill(self, generate: Callable[[], tuple[Sequence[Any], Tensor]]) -> Fill:
        if not self.enabled:
            groups, _ = generate()
            return Fill(list(groups), 1, len(groups), 0, False, 0)
        batch, self.pending = self.pending[: self.target], self.pending[self.target:]
        from_surplus, rounds, generated, filtered = len(batch), 0, 0, 0
        while len(batch) < self.target and rounds < self.max_rounds:
            groups, rewards = generate()
            rounds, generated = rounds + 1, generated + len(groups)
            keep = self.informative(rewards)
            filtered += keep.count(False)
            batch += [g for g, k in zip(groups, keep) if k]
        surplus = batch[self.target:]
        batch = batch[: self.target]
        self.pending = (self.pending + surplus)[-self.max_surplus:] if self.max_surplus else []
        hit_cap = len(batch) < self.target
        if hit_cap and not self.warned:
            warnings.warn(f"dynamic sampling: {self.max_rounds} generation rounds gave {len(batch)} of {self.target} "
                          "prompt groups with reward spread (the task is too easy or too hard for the model); "
                          "training on what there is (warned once per run)", stacklevel=2)
            self.warned = True
        return Fill(batch, rounds, generated, filtered, hit_cap, from_surplus)

    def state_dict(self) -> dict:
        """The surplus groups must be plain data (tensors, numbers) for core.training.checkpoint."""
        return {"pending": list(self.pending), "warned": self.warned}

    def load_state_dict(self, state: dict) -> None:
        self.pending, self.warned = list(state["pending"]), bool(state["warned"])
