"""One interface for the single-agent trainer's update, and the rule that picks its backend.

:class:`TorchUpdate` is the reference: :func:`core.training.update.ppo_update` on the torch networks, with the
losses of :mod:`core.algo.losses` and torch's autograd and Adam.  :class:`core.training.numpy_update.NumpyUpdate`
computes the same step in NumPy with hand-derived gradients, 4x faster for small CPU MLPs, where it is what runs.
``tests/test_update_backends.py`` runs one table of hand-worked cases against both, so they cannot drift apart.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple, Optional, Protocol

import torch
from torch import nn

from core.algo.proximal import Proximal
from core.algo.sampler import DynamicSampler
from core.training.distributed import Distributed
from core.training.numpy_update import NumpyUpdate
from core.training.update import Evaluation, UpdateSettings, grad_groups, ppo_update

ClipRanges = tuple[float, float, Optional[float]]  # (eps_low, eps_high, eps_V or None)


class UpdateBackend(Protocol):
    """``update(sampler, clip_ranges, settings, proximal) -> (train/ metrics averaged over minibatches, finite)``:
    ``settings.num_epochs x settings.num_minibatches`` gradient steps on the actor and critic it was built on;
    ``finite`` is False when a non-finite loss stopped the update before it reached the weights.  With ``proximal``
    the ratio is clipped around ``proximal.logp`` and each surrogate weighted by ``proximal.weight``."""

    name: str

    @staticmethod
    def supports(actor: nn.Module, critic: nn.Module, device: torch.device, distributed: bool) -> bool: ...

    def update(self, sampler: DynamicSampler, clip_ranges: ClipRanges, settings: UpdateSettings,
               proximal: Optional[Proximal] = None) -> tuple[dict[str, float], bool]: ...


class TorchUpdate:
    """The reference backend: :func:`~core.training.update.ppo_update` with per-network (``separate``) or joint
    gradient clipping; ``evaluate(mb) -> Evaluation`` defaults to the actor's ``evaluate`` and the critic."""

    name = "torch"

    def __init__(self, actor: nn.Module, critic: nn.Module, optimizer: torch.optim.Optimizer, separate: bool,
                 evaluate: Optional[Callable[[NamedTuple], Evaluation]] = None, dist: Optional[Distributed] = None):
        self.actor, self.critic, self.optimizer, self.separate, self.dist = actor, critic, optimizer, separate, dist
        self.evaluate = evaluate or (lambda mb: Evaluation(*actor.evaluate(mb.obs, mb.actions), critic(mb.obs)))

    @staticmethod
    def supports(actor: nn.Module, critic: nn.Module, device: torch.device, distributed: bool) -> bool:
        return True

    def update(self, sampler: DynamicSampler, clip_ranges: ClipRanges, settings: UpdateSettings,
               proximal: Optional[Proximal] = None) -> tuple[dict[str, float], bool]:
        return ppo_update(sampler, self.evaluate, self.optimizer, grad_groups(self.actor, self.critic, self.separate),
                          lambda mb: clip_ranges, settings, self.dist, proximal)


def pick_update_backend(cfg: Any, extensions: Iterable[Any], actor: nn.Module, critic: nn.Module,
                        optimizer: torch.optim.Optimizer, evaluate: Callable[[NamedTuple], Evaluation],
                        dist: Distributed) -> UpdateBackend:
    """NumPy where the config asks for it (``cfg.numpy_update``), nothing is compiled, every active extension
    declares NumPy support and the networks are CPU tanh MLPs on one process; torch otherwise.  ``cfg`` is a
    :class:`core.config.options.TrainConfig`; ``dist.device`` is where the networks live."""
    separate = not cfg.joint_grad_clip
    wanted = cfg.numpy_update and not cfg.compile and all(e.numpy_update for e in extensions)
    if wanted and NumpyUpdate.supports(actor, critic, dist.device, dist.enabled):
        return NumpyUpdate(actor, critic, optimizer, separate)
    return TorchUpdate(actor, critic, optimizer, separate, evaluate, dist)
