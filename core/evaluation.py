"""Evaluate a trained actor with frozen observation statistics."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from core.checkpoint import load_checkpoint
from core.config import TrainConfig, validate
from core.envs import ObsNormalizer, make_vec_env, to_env_actions


@torch.no_grad()
def evaluate(env_id: str, actor: torch.nn.Module, obs_norm: ObsNormalizer, episodes: int, seed: int,
             device: torch.device, deterministic: bool = True) -> list[float]:
    """Undiscounted raw returns of ``episodes`` full episodes on one env (mean action / argmax when
    ``deterministic``).  The normaliser is read, never updated."""
    envs = make_vec_env(env_id, 1)
    obs, _ = envs.reset(seed=seed)
    returns, ep_return = [], 0.0
    while len(returns) < episodes:
        o = torch.as_tensor(obs_norm(obs), device=device)
        action = actor.mode(o) if deterministic else actor.distribution(o).sample()
        obs, reward, term, trunc, _ = envs.step(to_env_actions(action, envs.single_action_space))
        ep_return += float(reward[0])
        if term[0] or trunc[0]:
            returns.append(ep_return)
            ep_return = 0.0
    envs.close()
    return returns


def evaluate_run(run_dir: Path, episodes: int, seed: int, device: str = "cpu",
                 deterministic: bool = True) -> list[float]:
    """Load ``run_dir``'s config and checkpoint and evaluate its actor."""
    from core.cli_config import load_run_config
    from core.trainer import build_actor, pick_device

    cfg: TrainConfig = load_run_config(Path(run_dir))
    validate(cfg)
    state = load_checkpoint(Path(run_dir) / "checkpoint.pt")
    dev = pick_device(device)
    envs = make_vec_env(cfg.env, 1)
    actor = build_actor(envs.single_observation_space, envs.single_action_space, cfg.hidden_sizes).to(dev)
    actor.load_state_dict(state["actor"])
    obs_norm = ObsNormalizer(envs.single_observation_space.shape, cfg.norm_obs)
    obs_norm.load_state_dict(state["obs_norm"])
    envs.close()
    return evaluate(cfg.env, actor, obs_norm, episodes, seed, dev, deterministic)


def mean_std(x: list[float]) -> tuple[float, float]:
    return float(np.mean(x)), float(np.std(x))
