"""Playing whole episodes (Atari games, or any env with flat Box observations) with a Decision Transformer:
evaluation and online rollouts.

All envs step together; each keeps its own context of the last ``K`` steps (state features cached, so
every step encodes one new observation per env).  The return-to-go input starts at the target return and
drops by every reward received, as in Chen et al. (2021).  Discrete actions are sampled from the softmax; Box
actions are the tanh head's output, deterministic as in the DT paper, mapped from [-1, 1] to the env's bounds.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

import gymnasium as gym

from core.config.errors import ConfigError
from core.envs.backends import EnvPoolBackend, make_backend
from dapo_dt.model import DecisionTransformer


class Episode(NamedTuple):
    """One finished game as the acting model saw it; per-step arrays ``(T, ...)``."""

    frames: np.ndarray    # (T + 1, 84, 84) uint8 newest frames, or (T + 1, D) states (recorded games only, else empty)
    actions: np.ndarray   # (T,) int64, or (T, A) float32 Box actions in [-1, 1]
    rewards: np.ndarray   # (T,) float32 raw game rewards
    rtg_in: np.ndarray    # (T,) float32 return-to-go the model was conditioned on (raw units)
    logp: np.ndarray      # (T,) float32 log-prob of the action under the acting model
    score: float


class _Context:
    def __init__(self, target_return: float, first_frame: Optional[np.ndarray] = None):
        self.feats: list[Tensor] = []
        self.actions: list = []  # ints, or (A,) arrays in [-1, 1]
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
    """Play ``episodes`` games, ``ceil(episodes / num_envs)`` per env and keep the first ``episodes`` by their order of
    start (so short games are not favoured);
    a game longer than ``max_steps`` is cut, counted, and its env waits for the next game.  Actions are
    sampled from the model's softmax with a generator seeded by ``seed`` (Box actions: the tanh head's output).
    ``record`` keeps the observations.  An env whose spaces do not fit the model: one line."""
    model.eval()
    K = model.cfg.context_len
    envs = make_backend(env_id, num_envs, "auto", seed, training=False)  # EnvPool if installed, else Gymnasium
    try:
        check_env_fits(model, envs.single_observation_space, envs.single_action_space, env_id)
        return _play(model, envs, episodes, num_envs, target_return, return_scale, seed, device, target_advantage,
                     max_steps, record, K)
    finally:
        envs.close()


def _play(model, envs, episodes, num_envs, target_return, return_scale, seed, device, target_advantage, max_steps,
          record, K) -> list[Episode]:
    same_step = not isinstance(envs, EnvPoolBackend)  # Gymnasium: a game's last step shows the next game
    frames = model.cfg.state_dim == 0
    box = model.continuous
    if box:
        low, high = (np.asarray(b, np.float32) for b in (model.cfg.action_low, model.cfg.action_high))

    def newest(x: np.ndarray, i: int) -> np.ndarray:  # what a step stores: the newest frame, or the state
        return x[i, -1].copy() if frames else np.asarray(x[i], np.float32).copy()

    def as_input(x: np.ndarray) -> Tensor:
        return torch.as_tensor(x if frames else np.asarray(x, np.float32), device=device)

    gen = torch.Generator(device=device).manual_seed(seed)
    obs = envs.reset(seed)
    quota = [math.ceil(episodes / num_envs)] * num_envs
    ctx = [_Context(target_return, newest(obs, i) if record else None) for i in range(num_envs)]
    waiting = [False] * num_envs  # a cut game: skip its remaining steps
    finished: list[tuple[int, int, Episode]] = []  # (game number within its env, env, episode)
    started = [0] * num_envs
    while any(q > 0 for q in quota):
        feats = model.encode_states(as_input(obs)[:, None])[:, 0]   # (N, d)
        for i, c in enumerate(ctx):
            c.feats.append(feats[i])
        out = _last_logits(model, ctx, K, device, target_advantage, return_scale)        # (N, A)
        if box:  # deterministic, as in the DT paper; [-1, 1] -> the env's bounds
            chosen = out.clamp(-1.0, 1.0).cpu().numpy()
            logp = torch.zeros(len(ctx))
            env_actions = low + (chosen + 1.0) * 0.5 * (high - low)
        else:
            logp_all = torch.log_softmax(out, -1)
            actions = torch.multinomial(logp_all.exp(), 1, generator=gen).squeeze(-1)
            logp = logp_all.gather(-1, actions[:, None]).squeeze(-1)
            chosen = env_actions = actions.cpu().numpy()
        step = envs.step(env_actions)
        for i, c in enumerate(ctx):
            if not step.valid[i]:  # EnvPool's reset step starts the next game
                ctx[i] = _Context(target_return, newest(step.obs, i) if record else None)
                waiting[i] = False
                continue
            if not (waiting[i] or quota[i] == 0):
                c.actions.append(chosen[i].astype(np.float32) if box else int(chosen[i]))
                c.rewards.append(float(step.score[i]))
                c.logp.append(float(logp[i]))
                c.rtg.append(c.rtg[-1] - float(step.score[i]))
                if record:
                    c.frames.append(newest(step.final_obs if step.game_over[i] else step.obs, i))
                if step.game_over[i] or len(c.actions) >= max_steps:
                    finished.append((started[i], i, c.episode(record)))
                    started[i] += 1
                    quota[i] -= 1
                    waiting[i] = not step.game_over[i]
            if same_step and step.game_over[i]:  # this step's observation is the next game's first
                ctx[i] = _Context(target_return, newest(step.obs, i) if record else None)
                waiting[i] = False
        obs = step.obs
    # the first games of every env, then the second ones...: chosen by their order of start, never by how soon they
    # ended (the first ``episodes`` to end would favour short games, e.g. a Hopper that falls)
    return [ep for _, _, ep in sorted(finished, key=lambda f: f[:2])][:episodes]


def check_env_fits(model: DecisionTransformer, obs_space: gym.Space, act_space: gym.Space, env_id: str) -> None:
    """One line when ``env_id``'s spaces are not the ones the model was trained on (e.g. a run's config naming
    another env)."""
    cfg = model.cfg
    obs_ok = (obs_space.shape == (4, 84, 84)) if cfg.state_dim == 0 else (
        isinstance(obs_space, gym.spaces.Box) and obs_space.shape == (cfg.state_dim,))
    act_ok = (isinstance(act_space, gym.spaces.Box) and act_space.shape == (cfg.act_dim,)) if cfg.act_dim else (
        isinstance(act_space, gym.spaces.Discrete) and int(act_space.n) == cfg.n_actions)
    if not (obs_ok and act_ok):
        trained = ("4x84x84 Atari frame stacks" if cfg.state_dim == 0 else f"{cfg.state_dim}-d states") + " and " + (
            f"{cfg.act_dim}-d Box actions" if cfg.act_dim else f"{cfg.n_actions} Discrete actions")
        raise ConfigError(f"env {env_id} has observations {obs_space} and actions {act_space}, but this model was "
                          f"trained on {trained}; evaluate on the dataset's env (--env)")


def _last_logits(model: DecisionTransformer, ctx: list[_Context], K: int, device: torch.device,
                 target_advantage: Optional[float], return_scale: float) -> Tensor:
    """Logits (Box actions: the predicted actions) for each env's current step from its last ``K`` steps,
    left-padded to ``K``."""
    N, d, A = len(ctx), model.cfg.n_embd, model.cfg.act_dim
    feats = torch.zeros((N, K, d), device=device)
    rtg = torch.zeros((N, K), device=device)
    actions = (torch.zeros((N, K, A), device=device) if A else torch.zeros((N, K), dtype=torch.long, device=device))
    timesteps = torch.zeros((N, K), dtype=torch.long, device=device)
    mask = torch.zeros((N, K), dtype=torch.bool, device=device)
    for i, c in enumerate(ctx):
        now = len(c.actions)  # index of the current step within its game
        n = min(now + 1, K)
        t0 = now + 1 - n
        feats[i, K - n:] = torch.stack(c.feats[-n:])
        rtg[i, K - n:] = torch.tensor(c.rtg[t0:t0 + n], device=device) / return_scale
        past = c.actions[t0:] + [np.zeros(A, np.float32) if A else 0]  # the current action is unknown: a dummy
        actions[i, K - n:] = torch.as_tensor(np.array(past[:n]), device=device)  # the model never sees
        timesteps[i, K - n:] = torch.arange(t0, t0 + n, device=device)
        mask[i, K - n:] = True
        if len(c.feats) > K:  # drop features that left the window
            del c.feats[0]
    adv = None if target_advantage is None else torch.full((N, K), target_advantage, device=device)
    out = model(rtg, None, actions, timesteps, mask, adv, state_feat=feats)
    return out.logits[:, -1].float()
