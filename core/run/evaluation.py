"""Evaluate a trained actor with frozen observation statistics."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from core.envs.backends import make_backend
from core.training.checkpoint import load_checkpoint, load_state, require
from core.config.options import TrainConfig
from core.envs.rollout import ObsNormalizer, to_env_actions
from core.envs.make import is_atari


def evaluation_envs(env_id: str, seed: int, env_kwargs: Optional[dict] = None):
    """One evaluation env: whole Atari games (EnvPool's if installed, else ale-py's), else a sync Gymnasium env."""
    return make_backend(env_id, 1, "auto" if is_atari(env_id) else "sync", seed, training=False,
                        env_kwargs=env_kwargs)


@torch.no_grad()
def evaluate(env_id: str, actor: torch.nn.Module, obs_norm: ObsNormalizer, episodes: int, seed: int,
             device: torch.device, deterministic: bool = True, seen: Optional[list] = None,
             env_kwargs: Optional[dict] = None, video_dir: Optional[Path] = None) -> list[float]:
    """Raw scores of ``episodes`` full episodes on one env (whole games with unclipped rewards on
    Atari); the mean action / argmax when ``deterministic``.  The normaliser is read, never updated.
    ``seen``, when given, receives every raw observation the actor acted on.  ``video_dir``: record every episode
    there (:mod:`core.run.video`; a single rendering env that plays the same episodes for a given seed)."""
    def act(obs: np.ndarray, act_space) -> np.ndarray:
        if seen is not None:
            seen.append(np.array(obs[0]))
        o = torch.as_tensor(obs_norm(obs), device=device)
        return to_env_actions(actor.mode(o) if deterministic else actor.sample(o)[0], act_space)

    if video_dir is not None:
        return _recorded(env_id, env_kwargs, act, episodes, seed, Path(video_dir))
    envs = evaluation_envs(env_id, seed, env_kwargs)
    obs = envs.reset(seed=seed)
    returns, ep_return = [], 0.0
    while len(returns) < episodes:
        step = envs.step(act(obs, envs.single_action_space))
        obs = step.obs
        ep_return += float(step.score[0])
        if step.game_over[0]:
            returns.append(ep_return)
            ep_return = 0.0
    envs.close()
    return returns


def _recorded(env_id: str, env_kwargs: Optional[dict], act, episodes: int, seed: int, folder: Path) -> list[float]:
    """:func:`evaluate`'s episodes on one env recording them into ``folder``: reset with ``seed`` once, then
    unseeded, as the vector env's autoreset (Atari: the whole games with raw rewards of ``training=False``)."""
    from core.run.video import recording_env

    env = recording_env(env_id, env_kwargs, folder)
    try:
        obs, _ = env.reset(seed=seed)
        returns, ep_return = [], 0.0
        while len(returns) < episodes:
            obs, reward, terminated, truncated, _ = env.step(act(np.asarray(obs)[None], env.action_space)[0])
            ep_return += float(reward)
            if terminated or truncated:
                returns.append(ep_return)
                ep_return = 0.0
                if len(returns) < episodes:
                    obs, _ = env.reset()
    finally:
        env.close()
    return returns


def load_run_policy(run_dir: Path, device: str = "cpu",
                    trust_env: bool = False) -> tuple[TrainConfig, torch.nn.Module, ObsNormalizer]:
    """``run_dir``'s config, its checkpoint's actor (on ``device``) and observation normaliser; ``trust_env`` confirms
    a saved env that would import code (core/config/trust.py)."""
    from core.algo.networks import build_networks
    from core.run.presets import complete
    from core.run.rundir import load_run_config
    from core.training.trainer import pick_device

    cfg = complete(load_run_config(Path(run_dir), trust_env))
    path = Path(run_dir) / "checkpoint.pt"
    state = load_checkpoint(path)
    require(state, ("actor", "obs_norm"), path)
    envs = evaluation_envs(cfg.env, 0, cfg.env_kwargs)
    actor, _ = build_networks(envs.single_observation_space, envs.single_action_space, cfg.hidden_sizes,
                              cfg.precision == "bf16")
    envs.close()
    actor = actor.to(pick_device(device))
    obs_norm = ObsNormalizer(envs.single_observation_space.shape, cfg.norm_obs)
    load_state(actor, state["actor"], path)
    load_state(obs_norm, state["obs_norm"], path)
    return cfg, actor, obs_norm


def evaluate_run(run_dir: Path, episodes: int, seed: int, device: str = "cpu",
                 deterministic: Optional[bool] = None, trust_env: bool = False,
                 video_dir: Optional[Path] = None) -> list[float]:
    """Load ``run_dir``'s config and checkpoint and evaluate its actor (``deterministic`` defaults to
    the run's ``eval_deterministic``); ``video_dir``: record the episodes there (:mod:`core.run.video`)."""
    if video_dir is not None:
        from core.run.video import check_video_dir, video_format

        check_video_dir(video_dir)  # before the checkpoint is read: bad input costs nothing
        video_format()
    cfg, actor, obs_norm = load_run_policy(run_dir, device, trust_env)
    if deterministic is None:
        deterministic = cfg.eval_deterministic is not False
    return evaluate(cfg.env, actor, obs_norm, episodes, seed, next(actor.parameters()).device, deterministic,
                    env_kwargs=cfg.env_kwargs, video_dir=video_dir)


def sample_std(x) -> float:
    """Sample standard deviation of ``x`` ``(n,)`` (``ddof=1``, Bessel's correction); NaN for ``n < 2``, where it
    is undefined.  Every spread the toolkit reports is this one, so that a table's "+- std" over 3-10 seeds is not
    the population std's underestimate (by ``sqrt((n - 1) / n)``: 0.82 at 3 seeds, 0.89 at 5)."""
    x = np.asarray(x, dtype=float)
    return float(x.std(ddof=1)) if x.size > 1 else math.nan


def mean_std(x: list[float]) -> tuple[float, float]:
    """Mean and sample std (:func:`sample_std`, ddof=1) of episode returns ``(n,)``: ``eval_return_std``."""
    return float(np.mean(x)), sample_std(x)


def number(x, spec: str = ".1f") -> str:
    """``x`` formatted by ``spec``, or ``n/a`` where it is undefined (None or NaN: a std over fewer than two episodes,
    a mean over none)."""
    return "n/a" if x is None or not math.isfinite(x) else format(x, spec)
