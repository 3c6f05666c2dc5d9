"""Playing whole Atari games with a Decision Transformer: evaluation and online rollouts.

All envs step together; each keeps its own context of the last ``K`` steps (CNN features cached, so
every step encodes one new frame per env).  The return-to-go input starts at the target return and
drops by every reward received, as in Chen et al. (2021).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

from core.backends import EnvPoolBackend
from dapo_dt.model import DecisionTransformer


class Episode(NamedTuple):
    """One finished game as the acting model saw it; per-step arrays ``(T, ...)``."""

    frames: np.ndarray    # (T, 4, 84, 84) uint8 stacks
    actions: np.ndarray   # (T,) int64
    rewards: np.ndarray   # (T,) float32 raw game rewards
    logp: np.ndarray      # (T,) float32 log-prob of the action under the acting model
    score: float


class _Context:
    def __init__(self):
        self.feats: list[Tensor] = []
        self.actions: list[int] = []
        self.rtg: list[float] = []
        self.frames: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.logp: list[float] = []


@torch.no_grad()
def play(model: DecisionTransformer, env_id: str, episodes: int, num_envs: int, target_return: float,
         return_scale: float, seed: int, device: torch.device, target_advantage: Optional[float] = None,
         max_steps: int = 27_000, record: bool = False) -> list[Episode]:
    """Play until ``episodes`` games finish (games longer than ``max_steps`` are cut and counted);
    actions are sampled from the model's softmax.  ``record`` keeps frames for online updates."""
    model.eval()
    K = model.cfg.context_len
    envs = EnvPoolBackend(env_id, num_envs, seed, training=False)
    obs = envs.reset(seed)
    ctx = [_Context() for _ in range(num_envs)]
    for c in ctx:
        c.rtg.append(target_return)
    finished: list[Episode] = []
    while len(finished) < episodes:
        feats = model.encode_states(torch.as_tensor(obs, device=device)[:, None])[:, 0]   # (N, d)
        for i, c in enumerate(ctx):
            c.feats.append(feats[i])
        logits = _last_logits(model, ctx, K, device, target_advantage, return_scale)        # (N, A)
        dist = torch.distributions.Categorical(logits=logits)
        actions = dist.sample()
        logp = dist.log_prob(actions)
        step = envs.step(actions.cpu().numpy())
        for i, c in enumerate(ctx):
            if not step.valid[i]:  # EnvPool's reset step starts the next game
                ctx[i] = _Context()
                ctx[i].rtg.append(target_return)
                continue
            c.actions.append(int(actions[i]))
            c.rewards.append(float(step.score[i]))
            c.logp.append(float(logp[i]))
            if record:
                c.frames.append(obs[i].copy())
            c.rtg.append(c.rtg[-1] - float(step.score[i]))
            if step.game_over[i] or len(c.actions) >= max_steps:
                finished.append(Episode(np.stack(c.frames) if record else np.empty(0), np.array(c.actions),
                                        np.array(c.rewards, np.float32), np.array(c.logp, np.float32),
                                        float(sum(c.rewards))))
                if not step.game_over[i]:  # cut: this env's next games would not be comparable
                    ctx[i] = _Context()
                    ctx[i].rtg.append(target_return)
        obs = step.obs
    envs.close()
    return finished[:episodes]


def _last_logits(model: DecisionTransformer, ctx: list[_Context], K: int, device: torch.device,
                 target_advantage: Optional[float], return_scale: float) -> Tensor:
    """Logits for each env's current step from its last ``K`` steps, left-padded to ``K``."""
    N, d = len(ctx), model.cfg.n_embd
    feats = torch.zeros((N, K, d), device=device)
    rtg = torch.zeros((N, K), device=device)
    actions = torch.zeros((N, K), dtype=torch.long, device=device)
    timesteps = torch.zeros((N, K), dtype=torch.long, device=device)
    mask = torch.zeros((N, K), dtype=torch.bool, device=device)
    for i, c in enumerate(ctx):
        now = len(c.actions)  # index of the current step within its game
        n = min(now + 1, K)
        t0 = now + 1 - n
        feats[i, K - n:] = torch.stack(c.feats[-n:])
        rtg[i, K - n:] = torch.tensor(c.rtg[t0:t0 + n], device=device) / return_scale
        past = c.actions[t0:] + [0]  # the current action is unknown: a dummy the model never sees
        actions[i, K - n:] = torch.tensor(past[:n], device=device)
        timesteps[i, K - n:] = torch.arange(t0, t0 + n, device=device)
        mask[i, K - n:] = True
        if len(c.feats) > K:  # drop features that left the window
            del c.feats[0]
    adv = None if target_advantage is None else torch.full((N, K), target_advantage, device=device)
    out = model(rtg, None, actions, timesteps, mask, adv, state_feat=feats)
    return out.logits[:, -1].float()
