"""Evaluate a multi-agent policy: undiscounted per-agent returns averaged over agents."""
from __future__ import annotations

import numpy as np
import torch

from dapo_ma.config import MAConfig, parse_env_kwargs
from dapo_ma.envs import BatchedParallelEnv


@torch.no_grad()
def evaluate(cfg: MAConfig, actor: torch.nn.Module, episodes: int, seed: int, device: torch.device,
             deterministic: bool = True) -> list[float]:
    """Returns of ``episodes`` full episodes on one env copy; each return is the mean over agents
    of the agent's summed raw rewards.  ``actor.act(obs, agent_id, deterministic)`` picks actions."""
    env = BatchedParallelEnv(cfg.env, parse_env_kwargs(cfg.env_kwargs), 1, seed)
    agent_id = torch.arange(len(env.agents), device=device).unsqueeze(0)  # (1, A)
    returns: list[float] = []
    while len(returns) < episodes:
        action = actor.act(torch.as_tensor(env.obs, device=device), agent_id, deterministic)
        out = env.step(action.cpu().numpy())
        returns.extend(float(np.mean(ep.returns)) for ep in out.episodes)
    env.close()
    return returns[:episodes]

