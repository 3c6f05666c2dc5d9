"""The proximal anchor for stale data: the decoupled PPO objective of Hilton et al. (2021, "Batch size-invariance
for policy optimization").

When the behaviour policy that collected a sample is older than the policy being updated (``--overlap``, a window
above one rollout), the ratio is clipped around the *proximal* policy (the one at the start of the update) and each
sample's surrogate is weighted by ``pi_prox / pi_behaviour``, so that the objective stays an expectation under the
proximal policy.  Pure tensor maths; the ``proximal_clip`` extension (core/extensions/proximal_clip.py) computes the
proximal log-probs and both update backends (core/training/update.py, core/training/numpy_update.py) consume them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # torch is imported where used: the proximal_clip extension is read for --help, which loads no torch
    from torch import Tensor

PROXIMAL_WEIGHT_CAP = 2.0  # a one-update lag gives weights near 1; the cap only bounds rare outliers


class Proximal(NamedTuple):
    """Stale transitions re-anchored on the proximal policy: ``logp`` ``(size,)``, the proximal policy's log-probs,
    replaces ``logp_old`` as the centre of the clip; ``weight`` ``(size,)`` = pi_prox / pi_behaviour (capped at
    :data:`PROXIMAL_WEIGHT_CAP`) multiplies each sample's surrogate."""

    logp: Tensor
    weight: Tensor


def proximal_anchor(logp_prox: Tensor, logp_behaviour: Tensor,
                    cap: float = PROXIMAL_WEIGHT_CAP) -> tuple[Proximal, dict[str, float]]:
    """:class:`Proximal` from the two log-probs ``(size,)`` (weights capped at ``cap``), and ``train/lag_kl``, the
    k3 estimate of KL(behaviour || proximal): how far the data's policy lags behind the one being updated."""
    import torch

    with torch.no_grad():
        log_w = logp_prox - logp_behaviour
        w = log_w.exp()
        lag_kl = float(((w - 1) - log_w).mean())
    return Proximal(logp_prox, w.clamp(max=cap)), {"train/lag_kl": lag_kl}
