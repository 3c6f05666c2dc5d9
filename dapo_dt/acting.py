"""Playing whole Atari games with a Decision Transformer: evaluation and online rollouts.

All envs step together; each keeps its own context of the last ``K`` steps (CNN features cached, so
every step encodes one new frame per env).  The return-to-go input starts at the target return and
drops by every reward received, as in Chen et al. (2021).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

from core.envs.backends import EnvPoolBackend, make_backend
from dapo_dt.model import DecisionTransformer


class Episode(NamedTuple):
    """One finished game as the acting model saw it; per-step arrays ``(T, ...)``."""

    frames: np.ndarray    # (T + 1, 84, 84) uint8 newest frames (recorded games only, else empty)
    actions: np.ndarray   # (T,) int64
    rewards: np.ndarray   # (T,) float32 raw game rewards
    rtg_in: np.ndarray    # (T,) float32 return-to-go the model was conditioned on (raw units)
    logp: np.ndarray      # (T,) float32 log-prob of the action under the acting model
    score: float


class _Context:
    def __init__(self, target_return: float, first_frame: Optional[np.ndarray] = None):
        self.feats: list[Tensor] = []
        self.actions: list[int] = []
        self.rtg: list[float] = [target_return]
        self.frames: list[np.ndarray] = [] if first_frame is None else [first_frame]
        self.rewards: list[float] = []
        self.logp: list[float] = []

    def episode(self, record: bool) -> Episode:
        n = len(self.actions)
        return Episode(np.stack(self.frames) if record else np.empty(0), np.array(self.actions),
                       np.array(self.rewards, np.float32), np.array(self.rtg[:n], np.float32),
                       np.array(self.logp, np.float32), float(sum(self.rewards)))


@torch.no_grad()
def play(model: DecisionTransformer, env_id: str, episodes: int, num_envs: int, target_return: float,
         return_scale: float, seed: int, device: torch.device, target_advantage: Optional[float] = None,
         max_steps: int = 27_000, record: bool = False) -> list[Episode]:
    """Play ``episodes`` games, ``ceil(episodes / num_envs)`` per env (so short games are not favoured);
    a game longer than ``max_steps`` is cut, counted, and its env waits for the next game.  Actions are
    sampled from the model's softmax with a generator seeded by ``seed``.  ``record`` keeps the frames."""
    model.eval()
    K = model.cfg.context_len
    envs = make_backend(env_id, num_envs, "auto", seed, training=False)  # EnvPool if installed, else ale-py
    same_step = not isinstance(envs, EnvPoolBackend)  # Gymnasium: a game's last step shows the next game
    gen = torch.Generator(device=device).manual_seed(seed)
    obs = envs.reset(seed)
    quota = [math.ceil(episodes / num_envs)] * num_envs
    ctx = [_Context(target_return, obs[i, -1].copy() if record else None) for i in range(num_envs)]
    waiting = [False] * num_envs  # a cut game: skip its remaining steps
    finished: list[Episode] = []
    while any(q > 0 for q in quota):
        feats = model.encode_states(torch.as_tensor(obs, device=device)[:, None])[:, 0]   # (N, d)
        for i, c in enumerate(ctx):
            c.feats.append(feats[i])
        logits = _last_logits(model, ctx, K, device, target_advantage, return_scale)        # (N, A)
        logp_all = torch.log_softmax(logits, -1)
        actions = torch.multinomial(logp_all.exp(), 1, generator=gen).squeeze(-1)
        logp = logp_all.gather(-1, actions[:, None]).squeeze(-1)
        step = envs.step(actions.cpu().numpy())
        for i, c in enumerate(ctx):
            if not step.valid[i]:  # EnvPool's reset step starts the next game
                ctx[i] = _Context(target_return, step.obs[i, -1].copy() if record else None)
                waiting[i] = False
                continue
            if not (waiting[i] or quota[i] == 0):
                c.actions.append(int(actions[i]))
                c.rewards.append(float(step.score[i]))
                c.logp.append(float(logp[i]))
                c.rtg.append(c.rtg[-1] - float(step.score[i]))
                if record:
                    c.frames.append((step.final_obs if step.game_over[i] else step.obs)[i, -1].copy())
                if step.game_over[i] or len(c.actions) >= max_steps:
                    finished.append(c.episode(record))
                    quota[i] -= 1
                    waiting[i] = not step.game_over[i]
            if same_step and step.game_over[i]:  # this step's observation is the next game's first
                ctx[i] = _Context(target_return, step.obs[i, -1].copy() if record else None)
                waiting[i] = False
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
