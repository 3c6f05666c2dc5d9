"""Data parallelism of the LM trainer under ``torchrun`` (:class:`core.training.distributed.Distributed`: gloo on the
CPU, NCCL on CUDA; docs/algorithms.md, section 8).

Every rank holds the same state (the prompts drawn, the group filter's batch and surplus, the random streams, the
weights, the optimiser); only the work is split, so that an update equals the one-process update on the same global
batch, to float rounding:

- **Generation.**  Every rank draws a round's ``P`` prompts from the same stream; rank ``r`` answers its contiguous
  share (``P / W``) of them, each group's answers from a stream of its own keyed by ``(seed, the group's index in the
  run)`` (``--group-streams``, :func:`group_generators`).  The groups (token ids, lengths, verdicts, rewards, the
  sampled log-probs: a few MB) are all-gathered in rank order, the one-process order, so the group filter
  (dynamic sampling), which runs on every rank alike, keeps and refills on the global round.
- **Update.**  pi_old travels with each group from the rank that sampled it.  Each minibatch (rank 0's
  permutation) is cut into ``W`` contiguous parts; each rank back-propagates its part's loss divided by the normaliser
  of the *whole* minibatch (every rank holds the batch's masks, so the token count of DAPO's token-mean needs no
  collective), and the gradients are summed: the sum is the one-process gradient.  The supervised warm start splits
  its batch the same way.
- **Evaluation** runs on rank 0, its result shared; **checkpoints** and every file are rank 0's (its state is every
  rank's), so a resume under any number of ranks reads one checkpoint.

A rank's reward that fails stops every rank at the same iteration with its error (:meth:`Shards.gather_groups`).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch
from torch import Tensor

from core.config.errors import ConfigError
from core.training.distributed import Distributed

STREAM_SALT = 0x5A4D_6C6D  # keeps a group's sampling stream apart from every other use of the seed


def group_generators(seed: int, first: int, n: int, device) -> list[torch.Generator]:
    """Sampling streams of the groups ``first .. first + n - 1`` of a run: one generator each, seeded from
    ``(seed, group index)`` alone, so that a group's answers do not depend on which rank, or which other groups,
    share its forward passes."""
    seeds = [int(np.random.SeedSequence([seed, STREAM_SALT, first + k]).generate_state(1, np.uint64)[0])
             for k in range(n)]
    return [torch.Generator(device=device).manual_seed(s) for s in seeds]


def check_world(prompts_per_batch: int, group_streams: Optional[bool], world_size: int) -> None:
    """One line when a run cannot be split over ``world_size`` ranks."""
    if world_size <= 1:
        return
    if prompts_per_batch % world_size:
        raise ConfigError(f"--prompts-per-batch {prompts_per_batch} is not a multiple of the {world_size} torchrun "
                          f"ranks (WORLD_SIZE); each rank answers an equal share of a batch's prompts")
    if group_streams is False:
        raise ConfigError("--no-group-streams is one random stream for one process; under torchrun leave it out")


class Shards:
    """This rank's share of the work, and the collectives that make the ranks' results one; with one process every
    method is the identity (the one-process run is unchanged)."""

    def __init__(self, dist: Distributed):
        self.dist, self.rank, self.world = dist, dist.rank, dist.world_size
        self.enabled = dist.enabled

    def part(self, n: int) -> slice:
        """This rank's contiguous share of ``n`` items (sizes differ by at most one, the larger first)."""
        q, r = divmod(n, self.world)
        start = self.rank * q + min(self.rank, r)
        return slice(start, start + q + (self.rank < r))

    def gather_groups(self, make: Callable[[], list]) -> list:
        """``make()`` (this rank's groups) on every rank -> every rank's groups in rank order.  A reward that fails on
        any rank raises its error on every rank, so that none waits in a collective for a rank that stopped."""
        from dapo_lm.rewards import RewardError

        if not self.enabled:
            return make()
        try:
            mine, error = make(), None
        except RewardError as e:
            mine, error = [], str(e)
        parts = self.dist.gather([(mine, error)])
        errors = [e for _, e in parts if e is not None]
        if errors:
            raise RewardError(errors[0])
        return [grp for groups, _ in parts for grp in groups]

    def permutation(self, n: int) -> Tensor:
        """``torch.randperm(n)`` from rank 0's global stream, the same on every rank."""
        if not self.enabled:
            return torch.randperm(n)
        return self.dist.gather([torch.randperm(n)] if self.dist.is_main else [])[0]

    def from_main(self, make: Callable[[], object]) -> object:
        """``make()`` run on rank 0 alone, its result on every rank (evaluation)."""
        if not self.enabled:
            return make()
        return self.dist.gather([make()] if self.dist.is_main else [])[0]

    def sum_gradients(self, params) -> None:
        self.dist.sum_gradients(list(params))

    def sum(self, values: dict[str, float]) -> dict[str, float]:
        return self.dist.sum_metrics(values)

    def any_true(self, flag: bool) -> bool:
        return self.dist.any_true(flag)

    def close(self, finished: bool = True) -> None:
        self.dist.close(finished)


def make_shards(device) -> tuple[torch.device, Optional[Shards]]:
    """This process's device (one GPU per local rank under torchrun) and its :class:`Shards`."""
    device = Distributed.local_device(device)
    return device, Shards(Distributed(device))
