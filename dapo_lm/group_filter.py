"""Group-filter dynamic sampling (DAPO, Yu et al. 2025, section 3.2, eq. 11; docs/algorithms.md, section 8).

A prompt group whose ``G`` answers are all correct or all wrong has zero group-relative advantage under DAPO's
binary reward: it adds no gradient but still dilutes the batch.  :class:`GroupFilter` keeps only informative groups
and generates further rounds until the batch holds ``target`` groups.  "Informative" is, by default, DAPO's rule
as published (and verl's recipe, which filters on ``acc``): ``0 < #correct < G`` by the verifier's verdicts
(``criterion="acc"``).  With the soft overlong penalty a reward-spread test is not the same thing: four wrong answers,
two of them truncated, have rewards [-1, -1, -2, -2], and training on that group only raises the probability of two
wrong answers.  ``criterion="std"`` keeps groups with reward spread instead (for non-binary rewards), with a
tolerance for float noise (:func:`dapo_lm.losses.constant_groups`).  Data that are too easy or too hard: after
``max_rounds`` rounds the batch is trained as it is, with one warning, never a crash.  Surplus groups of the last
round are discarded, as in verl; with ``carry=True`` they wait for the next batch (oldest first), each with the
behaviour log-probabilities it was sampled with (:func:`dapo_lm.rollout.generate_groups`).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from torch import Tensor

from dapo_lm.losses import CONSTANT_ATOL, constant_groups

CRITERIA = ("acc", "std")


@dataclass
class Fill:
    """One batch: ``groups`` to train on, and what it took."""

    groups: list
    rounds: int
    """Generation rounds run for this batch (0 if the surplus alone filled it)."""
    generated: int
    """Groups generated in those rounds."""
    filtered: int
    """Of those, groups dropped as uninformative (all answers right or all wrong; or no reward spread)."""
    hit_cap: bool
    """True when ``max_rounds`` ran out before the batch was full (it is trained short)."""
    from_surplus: int
    """Groups taken from the previous batch's surplus."""


class GroupFilter:
    """Fill batches of ``target`` informative prompt groups.

    ``generate()`` returns ``(groups, rewards, correct)``: a list of ``P`` groups (any objects), their rewards
    ``(P, G)`` and the verifier's verdicts ``(P, G)`` bool.  With ``enabled=False`` one round is generated and every
    group kept (GRPO).  ``criterion``: ``"acc"`` (0 < #correct < G) or ``"std"`` (reward spread).  Surplus groups
    are dropped unless ``carry``; then at most ``max_surplus`` (default ``target``) are kept, the oldest dropped
    first, as they are the most off-policy."""

    def __init__(self, target: int, max_rounds: int, enabled: bool = True, criterion: str = "acc",
                 carry: bool = False, max_surplus: int | None = None, atol: float = CONSTANT_ATOL):
        if target < 1 or max_rounds < 1:
            raise ValueError(f"target and max_rounds must be >= 1, got {target} and {max_rounds}")
        if criterion not in CRITERIA:
            raise ValueError(f"unknown criterion '{criterion}'; choose one of: {', '.join(CRITERIA)}")
        self.target, self.max_rounds, self.enabled, self.atol = target, max_rounds, enabled, atol
        self.criterion = criterion
        self.max_surplus = 0 if not carry else target if max_surplus is None else max_surplus
        self.pending: list = []  # surplus groups, oldest first (empty unless carry)
        self.warned = False

    def informative(self, rewards: Tensor, correct: Tensor) -> list[bool]:
        """``(P, G)`` rewards and verdicts -> per group: some but not all answers correct (``acc``), or reward
        spread beyond float noise (``std``)."""
        if self.criterion == "acc":
            n = correct.bool().sum(-1)
            return ((n > 0) & (n < correct.shape[-1])).tolist()
        return (~constant_groups(rewards, self.atol)).tolist()

    def fill(self, generate: Callable[[], tuple[Sequence[Any], Tensor, Tensor]]) -> Fill:
        if not self.enabled:
            groups, _, _ = generate()
            return Fill(list(groups), 1, len(groups), 0, False, 0)
        batch, self.pending = self.pending[: self.target], self.pending[self.target:]
        from_surplus, rounds, generated, filtered = len(batch), 0, 0, 0
        while len(batch) < self.target and rounds < self.max_rounds:
            groups, rewards, correct = generate()
            rounds, generated = rounds + 1, generated + len(groups)
            keep = self.informative(rewards, correct)
            filtered += keep.count(False)
            batch += [g for g, k in zip(groups, keep) if k]
        surplus = batch[self.target:]
        batch = batch[: self.target]
        self.pending = (self.pending + surplus)[-self.max_surplus:] if self.max_surplus else []
        hit_cap = len(batch) < self.target
        if hit_cap and not self.warned:
            what = "some but not all answers correct" if self.criterion == "acc" else "reward spread"
            warnings.warn(f"dynamic sampling: {self.max_rounds} generation rounds gave {len(batch)} of {self.target} "
                          f"informative prompt groups ({what}; the task is too easy or too hard for the model); "
                          "training on what there is (warned once per run)", stacklevel=2)
            self.warned = True
        return Fill(batch, rounds, generated, filtered, hit_cap, from_surplus)

    def state_dict(self) -> dict:
        """The surplus groups must be plain data (tensors, numbers) for core.training.checkpoint."""
        return {"pending": list(self.pending), "warned": self.warned}

    def load_state_dict(self, state: dict) -> None:
        """A saved surplus is kept only when carrying (at most ``max_surplus``, the newest)."""
        pending = list(state["pending"])
        self.pending = pending[-self.max_surplus:] if self.max_surplus else []
        self.warned = bool(state["warned"])
