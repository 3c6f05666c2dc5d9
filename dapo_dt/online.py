"""Online fine-tuning of a trained DT on its own fresh rollouts (SPEC 4, "dynamic clip range").

Each iteration plays ``online_envs`` whole games with the current model (the data-collecting DT),
then updates on K-step windows of those games:

- ``dt``: plain imitation of its own games, conditioned on their hindsight returns-to-go (as in
  Online DT, Zheng et al. 2022).
- ``dapo-dt``: DAPO's clipped-ratio objective ``min(r A, clip(r, 1-eps, 1+eps) A)`` against the
  collecting model (``r = pi / pi_collect``, both on the same windows; the collecting model's
  log-probs are taken before the first update), with ``A = G - V`` normalised, plus the value loss.
  The clip range is not fixed: after each iteration ``eps`` shrinks 1.5x when the measured KL to the
  collecting model exceeds 1.5x ``kl_target`` and grows 1.5x when it is below ``kl_target / 1.5``.
"""
from __future__ import annotations

import numpy as np
import torch

from core.losses import policy_loss, weighted_action_loss
from dapo_dt.data import Trajectories
from dapo_dt.trainer import DTTrainer, masked_normalise

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
    # frames (T+1, 84, 84): the newest frame of each stack, plus a dummy final frame (never indexed)
    episodes = [(np.concatenate([g.frames[:, -1], g.frames[-1:, -1]]), g.actions, g.rewards) for g in games]
    data = Trajectories.from_episodes(episodes, tr.data.n_actions, c.env)
    n_updates = max(1, c.online_epochs * steps // (c.batch_size * c.context_len))
    batches = [data.sample(c.batch_size, c.context_len, tr.rng, tr.device) for _ in range(n_updates)]
    metrics: dict[str, list[float]] = {}
    old_logp = None
    if c.algo == "dapo-dt":
        with torch.no_grad():  # the collecting model's log-probs on exactly the windows used below
            tr.model.eval()
            old_logp = [_logp(tr, b)[0] for b in batches]
    tr.model.train()
    for i, b in enumerate(batches):
        if old_logp is None:
            loss, m = _imitation_loss(tr, b)
        else:
            loss, m = _clipped_loss(tr, b, old_logp[i])
        tr.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tr.model.parameters(), c.max_grad_norm)
        tr.optimizer.step()
        for k, v in m.items():
            metrics.setdefault(k, []).append(v)
    out = {f"online/{k}": float(np.mean(v)) for k, v in metrics.items()}
    if old_logp is not None:
        out["online/clip"] = tr.clip
        tr.clip = adapt_clip(tr.clip, out["online/approx_kl"], c.kl_target)
    scores = [g.score for g in games]
    return {**out, "online/score_mean": float(np.mean(scores)), "online/games": len(games),
            "online/updates": n_updates}


def _logp(tr: DTTrainer, b):
    """Log-probs of the taken actions ``(B, K)``, values ``(B, K)`` and the model output."""
    rtg = b.rtg / tr.scale
    feats = tr.model.encode_states(b.frames)
    adv = None
    values = tr.model.value_head(feats).squeeze(-1) if tr.model.value_head is not None else None
    if tr.cfg.advantage_modulation and values is not None:
        adv = masked_normalise(rtg - values.detach(), b.mask)
    out = tr.model(rtg, None, b.actions, b.timesteps, b.mask, adv, state_feat=feats)
    logp = torch.log_softmax(out.logits.float(), -1).gather(-1, b.actions.unsqueeze(-1)).squeeze(-1)
    return logp, values, out


def _imitation_loss(tr: DTTrainer, b):
    _, _, out = _logp(tr, b)
    loss, diag = weighted_action_loss(out.logits, b.actions, None, b.mask)
    return loss, {"action_loss": float(loss.detach()), **{k: float(v) for k, v in diag.items()}}


def _clipped_loss(tr: DTTrainer, b, logp_old: torch.Tensor):
    logp, values, out = _logp(tr, b)
    rtg = b.rtg / tr.scale
    adv = masked_normalise(rtg - values.detach(), b.mask)
    m = b.mask
    pi_loss, diag = policy_loss(logp[m], logp_old[m], adv[m], tr.clip, tr.clip)
    v_loss = ((values - rtg) ** 2)[m].mean()
    loss = pi_loss + tr.cfg.value_coef * v_loss
    return loss, {"policy_loss": float(pi_loss.detach()), "value_loss": float(v_loss.detach()),
                  **{k: float(v) for k, v in diag.items()}}
