"""PufferLib 3.0's prioritized segment sampling, the peer DAPO's dynamic sampler is measured against.

Source: PufferLib 3.0's trainer (``pufferl.py``, Suarez et al.), which adapts prioritized experience replay
(Schaul et al. 2016) to on-policy minibatches.  A rollout of ``E`` envs x ``T`` steps is cut into
``S = E T / L`` segments of ``L`` consecutive steps of one env.  Every minibatch draws ``K = M / L`` segments,
without replacement within the minibatch, from

    P_s = (sum_{t in s} |A_t|)^alpha          p_s = (P_s + 1e-6) / sum_k (P_k + 1e-6)

and weights each transition of segment ``s`` by ``w_s = (S p_s)^-beta``, with ``beta`` annealed over training,
``beta = beta0 + (1 - beta0) alpha progress`` (it reaches 1 at the end only when ``alpha = 1``).  The weight
multiplies the normalised advantage, i.e. the clipped surrogate of each transition; the advantage statistics,
the value loss and the entropy stay unweighted (:attr:`SegmentSampler.weights_scope`).

How it differs from DAPO's sampler (:mod:`core.algo.sampler`): whole segments rather than transitions; a power of the
summed ``|A|`` rather than ``softmax(|A| / max|A| / T)``; fresh draws for every minibatch (a segment may return in
a later minibatch of the same epoch, never twice in one); and a partial importance correction that grows over
training.  What this module leaves out of PufferLib's trainer: V-trace advantages recomputed per minibatch.
"""
from __future__ import annotations

from typing import Iterator, Optional

import torch
from torch import Tensor

from core.algo.sampler import DynamicSampler, Transitions, effective_sample_size

PRIORITY_FLOOR = 1e-6  # keeps every segment drawable when its advantages are all zero


def segment_indices(num_envs: int, num_steps: int, segment_length: int) -> Tensor:
    """Window indices of each segment, ``(S, L)`` int64, for transitions stored time-major (``i = t E + e``, the
    trainer's flattening of a ``(T, E)`` rollout): segment ``(e, j)`` holds env ``e``'s steps ``j L .. j L + L - 1``."""
    t = torch.arange(num_steps).reshape(-1, segment_length)                 # (T / L, L) step numbers
    env = torch.arange(num_envs).reshape(-1, 1, 1)                          # (E, 1, 1)
    return (t.unsqueeze(0) * num_envs + env).reshape(-1, segment_length)    # (E T / L, L)


def segment_probs(adv: Tensor, segments: Tensor, alpha: float) -> Tensor:
    """``p_s`` for advantages ``adv`` ``(N,)`` and segment indices ``(S, L)`` -> ``(S,)``."""
    priority = adv.abs()[segments].sum(dim=1).pow(alpha) + PRIORITY_FLOOR  # (S,)
    return priority / priority.sum()


def annealed_beta(beta0: float, alpha: float, progress: float) -> float:
    """PufferLib's importance exponent at ``progress`` (share of training done) in [0, 1]."""
    return beta0 + (1.0 - beta0) * alpha * progress


class SegmentSampler(DynamicSampler):
    """Prioritized segments over one rollout (``capacity = E T``); see the module docstring.

    ``minibatches`` yields ``(indices (M,), weights (M,))``; :attr:`progress` (share of training done, set by the
    trainer before each update) drives the ``beta`` schedule.
    """

    weights_scope = "surrogate"

    def __init__(self, num_envs: int, num_steps: int, segment_length: int, alpha: float, beta0: float,
                 device: torch.device, seed: int = 0):
        if num_steps % segment_length:
            raise ValueError(f"segment_length {segment_length} must divide the rollout's {num_steps} steps per env")
        super().__init__(num_envs * num_steps, device, dynamic=False, seed=seed)
        self.segment_length, self.alpha, self.beta0 = segment_length, alpha, beta0
        self.segments = segment_indices(num_envs, num_steps, segment_length).to(self.device)  # (S, L)

    def add(self, batch: Transitions) -> None:
        if batch.obs.shape[0] != self.capacity:
            raise ValueError(f"prioritized segments need whole rollouts of {self.capacity} transitions (no dropped "
                             f"reset steps, as EnvPool's are), got {batch.obs.shape[0]}")
        super().add(batch)

    def segment_probabilities(self) -> Tensor:
        """``p_s`` over the current rollout's segments ``(S,)``."""
        return segment_probs(self.data.advantages, self.segments, self.alpha)

    def probabilities(self) -> Tensor:
        """Per-transition probability ``p_s / L`` ``(N,)``, for the ESS and max-weight diagnostics."""
        p = torch.empty(self.capacity, device=self.device)
        p[self.segments.reshape(-1)] = (self.segment_probabilities() / self.segment_length).repeat_interleave(
            self.segment_length)
        return p

    def minibatches(self, num_minibatches: int, minibatch_size: int) -> Iterator[tuple[Tensor, Optional[Tensor]]]:
        if minibatch_size % self.segment_length:
            raise ValueError(f"segment_length {self.segment_length} must divide the minibatch size {minibatch_size}")
        p = self.segment_probabilities()
        num_segments, per_minibatch = p.numel(), minibatch_size // self.segment_length
        beta = annealed_beta(self.beta0, self.alpha, self.progress)
        for _ in range(num_minibatches):
            chosen = torch.multinomial(p, per_minibatch, replacement=False, generator=self.generator)  # (K,)
            weights = (num_segments * p[chosen]).pow(-beta).repeat_interleave(self.segment_length)   # (M,)
            yield self.segments[chosen].reshape(-1), weights

    def stats(self) -> dict[str, float]:
        """``sampler/`` metrics: per-transition ESS and largest ``N p_i``, and the importance exponent ``beta``."""
        p = self.probabilities()
        return {"sampler/ess": float(effective_sample_size(p)), "sampler/max_weight": float(p.max() * p.numel()),
                "sampler/beta": annealed_beta(self.beta0, self.alpha, self.progress)}
