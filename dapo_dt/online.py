"""Online fine-tuning of a trained DT on its own fresh rollouts (docs/algorithms.md, "dynamic clip range").

Each iteration plays ``online_envs`` whole games with the current model (the data-collecting DT),
then updates on K-step windows of those games:

- ``dt``: plain imitation of its own games, conditioned on their hindsight returns-to-go (as in
  Online DT, Zheng et al. 2022).
- ``dapo-dt``: DAPO's clipped-ratio objective ``min(r A, clip(r, 1-eps, 1+eps) A)`` against the
  collecting model.  Both log-probs condition on what the model saw while acting (the decreasing
  target return-to-go and the constant target advantage) and run without dropout, so the ratio is
  exactly 1 before the first update; ``A = G - V_collect`` is fixed per window before updating, and
  ``V`` regresses on the hindsight return ``G`` with the offline rules (stop-gradient features unless
  ``value_trains_encoder``; the value head's gradient norm clipped apart from the rest).  The clip
  range is not fixed: after each iteration ``eps`` shrinks 1.5x when the KL to the collecting model
  exceeds 1.5x ``kl_target`` and grows 1.5x when it is below ``kl_target / 1.5``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from core.algo.losses import policy_loss
from dapo_dt.data import DTBatch, Trajectories
from dapo_dt.losses import action_loss, masked_normalise

if TYPE_CHECKING:  # the trainer calls this module; it is only named here in annotations
    from dapo_dt.trainer import DTTrainer

CLIP_BOUNDS = (0.02, 0.5)


def adapt_clip(eps: float, kl: float, kl_target: float) -> float:
    """KL-driven clip range: shrink when the policy moved too far, grow when it barely moved."""
    if kl > 1.5 * kl_target:
        eps /= 1.5
    elif kl < kl_target / 1.5:
        eps *= 1.5
    return float(np.clip(eps, *CLIP_BOUNDS))


def online_iteration(tr: DTTrainer) -> dict[str, float]:
    """Collect one batch of games, update on them; returns ``online/`` metrics."""
    c = tr.cfg
    games = tr.play(c.online_envs, seed=20_000 + c.seed + tr.env_steps, record=True)
    steps = sum(len(g.actions) for g in games)
    tr.env_steps += steps
    dapo = c.algo == "dapo-dt"
    data = Trajectories.from_episodes([(g.frames, g.actions, g.rewards) for g in games], tr.data.n_actions, c.env,
                                      cond_rtg=[g.rtg_in for g in games] if dapo else None, value_gamma=c.adv_gamma)
    n_updates = max(1, c.online_epochs * steps // (c.batch_size * c.context_len))
    batches = [data.sample(c.batch_size, c.context_len, tr.rng, tr.device) for _ in range(n_updates)]
    metrics: dict[str, list[float]] = {}
    if dapo:
        tr.model.eval()  # no dropout: the ratio compares the same function before and after updates
        with torch.no_grad():
            old = [_evaluate(tr, b) for b in batches]
        targets = [(logp, masked_normalise(b.returns / tr.scale - v, b.mask)) for b, (logp, v) in zip(batches, old)]
    else:
        tr.model.train()
    for i, b in enumerate(batches):
        loss, m = _clipped_loss(tr, b, *targets[i]) if dapo else _imitation_loss(tr, b)
        tr.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        tr.clip_gradients()  # value head apart from the rest, as offline
        tr.optimizer.step()
        for k, v in m.items():
            metrics.setdefault(k, []).append(v)
    out = {f"online/{k}": float(np.mean(v)) for k, v in metrics.items()}
    if dapo:
        out["online/clip"] = tr.clip
        tr.clip = adapt_clip(tr.clip, out["online/approx_kl"], c.kl_target)
    return {**out, "online/score_mean": float(np.mean([g.score for g in games])), "online/games": len(games),
            "online/updates": n_updates}


def _evaluate(tr: DTTrainer, b: DTBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of the taken actions ``(B, K)`` and values ``(B, K)``, conditioned as when acting."""
    feats = tr.model.encode_states(b.frames)
    adv = torch.full_like(b.rtg, tr.cfg.target_advantage) if tr.cfg.advantage_modulation else None
    out = tr.model(b.rtg / tr.scale, None, b.actions, b.timesteps, b.mask, adv, state_feat=feats)
    logp = torch.log_softmax(out.logits.float(), -1).gather(-1, b.actions.unsqueeze(-1)).squeeze(-1)
    return logp, tr.state_values(b.frames, feats)


def _imitation_loss(tr: DTTrainer, b: DTBatch):
    out = tr.model(b.returns / tr.scale, b.frames, b.actions, b.timesteps, b.mask)
    loss, diag = action_loss(out.logits, b.actions, None, b.mask)
    return loss, {"action_loss": float(loss.detach()), **{k: float(v) for k, v in diag.items()}}


def _clipped_loss(tr: DTTrainer, b: DTBatch, logp_old: torch.Tensor, adv: torch.Tensor):
    logp, values = _evaluate(tr, b)
    m = b.mask
    pi_loss, diag = policy_loss(logp[m], logp_old[m], adv[m], tr.clip, tr.clip)
    v_loss = ((values - b.returns / tr.scale) ** 2)[m].mean()
    loss = pi_loss + tr.cfg.value_coef * v_loss
    return loss, {"policy_loss": float(pi_loss.detach()), "value_loss": float(v_loss.detach()),
                  **{k: float(v) for k, v in diag.items()}}
