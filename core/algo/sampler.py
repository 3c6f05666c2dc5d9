"""DAPO's dynamic advantage-weighted sampler over a sliding window (docs/algorithms.md).

For the ``N`` transitions in the window::

    w_i = |A_i| / max_j |A_j|          (in [0, 1])
    p_i = softmax(w / T)_i              (T -> inf: uniform; small T: peaked on large |A|)

Each epoch draws ``M`` indices (minibatches x minibatch size) with replacement from ``p``, either
``multinomial`` (``torch.multinomial``, i.i.d. draws: sample ``i`` appears ``Binomial(M, p_i)`` times) or
``systematic`` (low-variance resampling, as in particle filters: one uniform offset ``u`` and the
points ``(u + k) / M``, ``k = 0..M-1``, read through the CDF of ``p``, so sample ``i`` appears
``floor(M p_i)`` or ``ceil(M p_i)`` times, then shuffled into minibatches).  Both have expected count
``M p_i``; systematic removes the sampling noise, and with uniform ``p`` and ``M = N`` it visits every
transition exactly once per epoch, like PPO's permutation.  ``without-replacement`` makes successive
draws from ``p`` renormalised over the transitions not yet drawn (``torch.multinomial(replacement=False)``):
within an epoch no transition repeats, so it only selects when the window holds more than ``M``
transitions (a window of several rollouts); then high-``|A|`` transitions are more likely to be among the
``M`` (inclusion probabilities lie between ``M p_i`` and uniform ``M / N``; no closed form, so no importance
correction).  With ``M > N`` each pass over the window is one permutation-like round.
``weighted`` draws nothing: each epoch is PPO's permutation and every loss is multiplied by ``N p_i``.
Since ``(1/N) sum_i N p_i g_i = sum_i p_i g_i = E_{i~p}[g_i]``, an epoch's mean gradient is the one the
draws have in expectation, without their sampling noise (a Rao-Blackwellisation of the draws): no
transition is skipped or repeated, the priority acts as a loss weight (mean 1 over the window).
With importance correction each sampled loss is multiplied by ``1 / (N p_i)``; since
``E_{i~p}[1/(N p_i) g_i] = (1/N) sum_i g_i``, the expected minibatch gradient equals uniform
sampling's, and ``E_p[1/(N p_i)] = 1`` keeps the loss scale.  With per-minibatch advantage normalisation the
statistics are taken under the same weights (:func:`core.algo.losses.normalised_advantages`), else the draws'
skew towards large ``|A|`` would rescale the gradient.

The temperature follows one of four rules (:class:`Temperature`).  The normalised effective sample
size ``ESS = 1 / (N sum_i p_i^2)`` (1 = uniform, 1/N = one sample) is logged every update.
"""
from __future__ import annotations

import math
from typing import Iterator, NamedTuple, Optional

import torch
from torch import Tensor


class Transitions(NamedTuple):
    """Flat transitions, each field ``(B, ...)``; ``logp_old`` and ``values_old`` are the behaviour
    policy's and critic's outputs at collection time, so stale samples are clipped against their own."""

    obs: Tensor
    actions: Tensor
    logp_old: Tensor
    values_old: Tensor
    advantages: Tensor
    returns: Tensor


def sampling_probs(adv: Tensor, temperature: float | Tensor) -> Tensor:
    """``p = softmax((|A| / max|A|) / T)``.  adv ``(N,)`` -> ``(N,)``; all-zero advantages give uniform p."""
    mag = adv.abs()
    w = mag / mag.max().clamp_min(1e-12)
    return torch.softmax(w / temperature, dim=0)


RESAMPLING = ("multinomial", "systematic", "without-replacement", "weighted")


def systematic_draws(p: Tensor, m: int, generator: Optional[torch.Generator] = None) -> Tensor:
    """``m`` indices from ``p`` ``(N,)`` by systematic resampling, shuffled: index ``i`` occurs
    ``floor(m p_i)`` or ``ceil(m p_i)`` times.  Returns ``(m,)`` int64."""
    u = torch.rand((), generator=generator, device=p.device, dtype=torch.float64)
    points = (u + torch.arange(m, device=p.device, dtype=torch.float64)) / m
    cdf = p.double().cumsum(0)
    draws = torch.searchsorted(cdf, points, right=True).clamp_max(p.numel() - 1)  # rounding guard at the top
    return draws[torch.randperm(m, generator=generator, device=p.device)]


def draws_without_replacement(p: Tensor, m: int, generator: Optional[torch.Generator] = None) -> Tensor:
    """``m`` indices from ``p`` ``(N,)``, none repeated within each round of ``min(m, N)`` draws (successive
    draws renormalise ``p`` over the indices left), shuffled.  Returns ``(m,)`` int64."""
    n, rounds, left = p.numel(), [], m
    while left > 0:
        rounds.append(torch.multinomial(p, min(left, n), replacement=False, generator=generator))
        left -= rounds[-1].numel()
    draws = torch.cat(rounds)
    return draws[torch.randperm(m, generator=generator, device=p.device)]  # draw order favours large p


def effective_sample_size(p: Tensor) -> Tensor:
    """Normalised ESS ``1 / (N sum p_i^2)`` of a distribution ``p`` ``(N,)``; in ``[1/N, 1]``."""
    return 1.0 / (p.numel() * p.pow(2).sum())


class Temperature:
    """Sampling temperature ``T`` and its update rule.

    - ``fixed``: ``T`` stays at ``init``.
    - ``ema``: after each rollout ``T <- 0.9 T + 0.1 std(w)`` (follows the spread of advantages).
    - ``decay``: after each update ``T <- decay * T``.
    - ``learnable``: ``log T`` is trained like SAC's entropy temperature: the loss
      ``log T * (ESS - target)`` has gradient ``ESS - target``, so T falls while the sampling is
      flatter than the target and rises while it is more peaked (ESS grows monotonically with T).
    ``decay``, ``ema`` and ``learnable`` are floored at ``minimum``.
    """

    def __init__(self, mode: str, init: float = 1.0, decay: float = 0.99, minimum: float = 0.0,
                 ess_target: float = 0.5, lr: float = 0.05, learn_steps: int = 10):
        self.mode, self.decay, self.minimum = mode, decay, minimum
        self.ess_target, self.learn_steps = ess_target, learn_steps
        self.log_t = torch.tensor(math.log(init), requires_grad=True)
        self.optimizer = torch.optim.Adam([self.log_t], lr=lr) if mode == "learnable" else None

    @property
    def value(self) -> float:
        return float(self.log_t.detach().exp())

    def _set(self, t: float) -> None:
        with torch.no_grad():
            self.log_t.fill_(math.log(max(t, self.minimum, 1e-8)))

    def on_rollout(self, adv: Tensor) -> None:
        """``ema`` and ``learnable`` rules, once per rollout, given the window's advantages ``(N,)``."""
        if self.mode == "ema":
            mag = adv.abs()
            w = mag / mag.max().clamp_min(1e-12)
            self._set(0.9 * self.value + 0.1 * float(w.std(unbiased=False)))
        elif self.mode == "learnable":
            adv = adv.detach().cpu()
            for _ in range(self.learn_steps):
                with torch.no_grad():
                    ess = float(effective_sample_size(sampling_probs(adv, self.log_t.exp())))
                self.optimizer.zero_grad()
                (self.log_t * (ess - self.ess_target)).backward()
                self.optimizer.step()
            self._set(self.value)  # apply the floor

    def on_update(self) -> None:
        """``decay`` rule, once after each update."""
        if self.mode == "decay":
            self._set(self.value * self.decay)

    def state_dict(self) -> dict:
        return {"log_t": self.log_t.detach().clone(),
                "optimizer": self.optimizer.state_dict() if self.optimizer else None}

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            self.log_t.copy_(state["log_t"])
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])


class DynamicSampler:
    """Sliding window of the most recent transitions, on the training device, with minibatch sampling.

    ``dynamic=False`` gives classic PPO minibatching: a fresh permutation each epoch, no replacement.
    ``dynamic=True`` draws from ``p = softmax(|A|/max|A| / T)`` by ``resampling`` (``multinomial``,
    ``systematic`` or ``without-replacement``), or with ``weighted`` keeps the permutation and yields the
    weights ``N p_i`` (see the module docstring).

    The interface the update uses: :meth:`window`, :meth:`minibatches` and :attr:`weights_scope` (``all``: the
    weights multiply every loss term and weight the advantage statistics; ``surrogate``: the clipped surrogate
    only).  :attr:`progress`, the share of training done, is set by the trainer before each update.
    """

    weights_scope = "all"

    def __init__(self, capacity: int, device: torch.device, temperature: Optional[Temperature] = None,
                 dynamic: bool = True, importance_correction: bool = False, seed: int = 0,
                 resampling: str = "multinomial"):
        if capacity < 1:
            raise ValueError(f"sampler capacity must be >= 1, got {capacity}")
        if resampling not in RESAMPLING:
            raise ValueError(f"unknown resampling '{resampling}'; choose one of: {', '.join(RESAMPLING)}")
        if resampling == "weighted" and importance_correction:
            raise ValueError("resampling 'weighted' with importance correction weights every loss by N p_i / (N p_i) = 1: "
                             "that is uniform minibatches; use dynamic=False instead")
        self.resampling = resampling
        self.capacity, self.device = capacity, torch.device(device)
        self.temperature = temperature or Temperature("fixed")
        self.dynamic, self.importance_correction = dynamic, importance_correction
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.probs_fn = sampling_probs  # replaceable by a compiled version (core.training.compile)
        self.data: Optional[Transitions] = None
        self.size = 0   # filled slots
        self.head = 0   # next slot to write (ring buffer)
        self.progress = 0.0

    def add(self, batch: Transitions) -> None:
        """Append ``B`` transitions, dropping the oldest beyond ``capacity``.  Any NamedTuple of
        ``(B, ...)`` tensors with an ``advantages`` field works (e.g. multi-agent transitions)."""
        b = batch.obs.shape[0]
        if self.data is None:
            self.data = type(batch)(*(torch.zeros((self.capacity, *x.shape[1:]), dtype=x.dtype, device=self.device)
                                      for x in batch))
        if b > self.capacity:  # only the most recent `capacity` transitions survive
            batch = type(batch)(*(x[-self.capacity:] for x in batch))
            b = self.capacity
        idx = (self.head + torch.arange(b, device=self.device)) % self.capacity
        for store, x in zip(self.data, batch):
            store[idx] = x.to(self.device)
        self.head = (self.head + b) % self.capacity
        self.size = min(self.size + b, self.capacity)

    def window(self) -> Transitions:
        """The stored transitions, ``(size, ...)`` each (storage order, not time order)."""
        return type(self.data)(*(x[: self.size] for x in self.data))

    def probabilities(self) -> Tensor:
        """Sampling distribution over the window ``(size,)``."""
        adv = self.data.advantages[: self.size]
        if not self.dynamic:
            return torch.full_like(adv, 1.0 / self.size)
        return self.probs_fn(adv, self.temperature.value)

    def minibatches(self, num_minibatches: int, minibatch_size: int) -> Iterator[tuple[Tensor, Optional[Tensor]]]:
        """One epoch: ``num_minibatches`` pairs ``(indices (M,), weights (M,) or None)``."""
        n, m = self.size, num_minibatches * minibatch_size
        if not self.dynamic or self.resampling == "weighted":
            perm = torch.cat([torch.randperm(n, generator=self.generator, device=self.device)
                              for _ in range(-(-m // n))])  # enough permutations to cover one epoch
            weights = n * self.probabilities()[perm] if self.dynamic else None
            for k in range(num_minibatches):
                sl = slice(k * minibatch_size, (k + 1) * minibatch_size)
                yield perm[sl], None if weights is None else weights[sl]
            return
        p = self.probabilities()
        if self.resampling == "systematic":
            draws = systematic_draws(p, m, self.generator)
        elif self.resampling == "without-replacement":
            draws = draws_without_replacement(p, m, self.generator)
        else:
            draws = torch.multinomial(p, m, replacement=True, generator=self.generator)
        weights = 1.0 / (n * p[draws]) if self.importance_correction else None
        for k in range(num_minibatches):
            sl = slice(k * minibatch_size, (k + 1) * minibatch_size)
            yield draws[sl], None if weights is None else weights[sl]

    def stats(self) -> dict[str, float]:
        """``sampler/`` metrics: T, ESS, and the largest ``N p_i`` (how much more likely than uniform)."""
        p = self.probabilities()
        return {"sampler/temperature": self.temperature.value,
                "sampler/ess": float(effective_sample_size(p)),
                "sampler/max_weight": float(p.max() * p.numel())}

    def state_dict(self) -> dict:
        return {"data": self.data, "size": self.size, "head": self.head,
                "generator": self.generator.get_state(), "temperature": self.temperature.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        data = state["data"]
        self.data = None if data is None else type(data)(*(x.to(self.device) for x in data))
        self.size, self.head = state["size"], state["head"]
        self.generator.set_state(state["generator"])
        self.temperature.load_state_dict(state["temperature"])
