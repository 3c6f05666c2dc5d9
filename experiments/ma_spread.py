"""simple_spread_v3 in unit-free terms, and its reference policies, for the multi-agent benchmarks.

- ``landmarks_covered``: the share of landmarks with an agent within 0.1 at the end of an episode (mpe2's own
  ``occupied_landmarks`` rule in ``Scenario.benchmark_data``);
- ``collisions``: agent pairs overlapping (distance below the sum of their sizes), counted once per pair and step,
  summed over the episode;
- reference policies: ``random`` (uniform actions) and ``greedy``, which sends the agents one by one to the nearest
  landmark no earlier agent took (a hand-written "nearest free landmark" heuristic with full state access).
Returns are mpe2 units: each agent's rewards summed over the episode's 25 steps, averaged over agents.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch

# mpe2's discrete moves: 0 none, 1 -x, 2 +x, 3 -y, 4 +y (continuous: the same five components, each in [0, 1])
MOVES = {(0, -1): 1, (0, 1): 2, (1, -1): 3, (1, 1): 4}


def world(parallel_env):
    """The mpe2 world behind a (padded) parallel env."""
    return parallel_env.unwrapped.world


def spread_stats(obs: np.ndarray, n_landmarks: int, touch: float) -> tuple[float, int]:
    """From one env copy's observations ``(A, D)`` (mpe2's layout: velocity, position, landmark positions relative to
    the agent, other agents' relative positions, ...): the share of landmarks covered (an agent within 0.1, mpe2's
    occupied rule) and the number of overlapping agent pairs (closer than ``touch``, the sum of two agents' sizes)."""
    A = obs.shape[0]
    landmarks = obs[:, 4:4 + 2 * n_landmarks].reshape(A, n_landmarks, 2)
    others = obs[:, 4 + 2 * n_landmarks:4 + 2 * n_landmarks + 2 * (A - 1)].reshape(A, A - 1, 2)
    covered = float((np.linalg.norm(landmarks, axis=-1).min(0) < 0.1).mean())
    return covered, int((np.linalg.norm(others, axis=-1) < touch).sum()) // 2  # each pair is seen by both agents


def greedy_targets(w) -> list[np.ndarray]:
    """Each agent's landmark: agents in order take the nearest landmark not taken yet."""
    free, targets = list(range(len(w.landmarks))), []
    for agent in w.agents:
        best = min(free, key=lambda k: np.linalg.norm(w.landmarks[k].state.p_pos - agent.state.p_pos))
        free.remove(best)
        targets.append(w.landmarks[best].state.p_pos)
    return targets


LEAD, TOLERANCE = 0.5, 0.05  # chosen among lead 0-3 x tol 0.02/0.05 on 20 episodes: 90% of landmarks covered


def greedy_actions(w, continuous: bool) -> np.ndarray:
    """The heuristic's actions ``(A,)`` (discrete) or ``(A, 5)`` (continuous): a push along the axis of the larger
    gap to the target, the gap anticipating the agent's velocity (MPE's agents coast: without the lead they overshoot
    and cover 8% of the landmarks instead of 90%)."""
    out = np.zeros((len(w.agents), 5), np.float32) if continuous else np.zeros(len(w.agents), np.int64)
    for i, (agent, target) in enumerate(zip(w.agents, greedy_targets(w))):
        gap = target - agent.state.p_pos - LEAD * agent.state.p_vel
        axis = int(np.argmax(np.abs(gap)))
        if abs(gap[axis]) < TOLERANCE:
            continue  # close enough: no push
        move = MOVES[(axis, int(np.sign(gap[axis])))]
        if continuous:
            out[i, move] = 1.0
        else:
            out[i] = move
    return out


@torch.no_grad()
def evaluate(cfg, policy: Callable[[np.ndarray, object], np.ndarray], episodes: int, seed: int) -> dict:
    """Mean return (per agent), landmarks covered at the end and collisions per episode, over ``episodes`` whole
    episodes of one env copy; ``policy(obs (1, A, D), world) -> actions (1, A[, K])``."""
    from dapo_ma.envs import BatchedParallelEnv

    env = BatchedParallelEnv(cfg.env, dict(cfg.env_kwargs), 1, seed)
    w = world(env.envs[0])
    n_landmarks, touch = len(w.landmarks), 2 * w.agents[0].size
    returns, covered, crashes, running = [], [], [], 0
    while len(returns) < episodes:
        out = env.step(policy(env.obs, world(env.envs[0])))
        ended = bool(out.episodes)
        cover, hits = spread_stats((out.final_obs if ended else out.obs)[0], n_landmarks, touch)
        running += hits
        if ended:  # the env has reset already: its final observation tells where the episode ended
            returns.extend(float(np.mean(ep.returns)) for ep in out.episodes)
            covered.append(cover)
            crashes.append(running)
            running = 0
    env.close()
    return {"return": float(np.mean(returns[:episodes])), "landmarks_covered": float(np.mean(covered[:episodes])),
            "collisions": float(np.mean(crashes[:episodes]))}


def trained_policy(agent, deterministic: bool = True) -> Callable:
    """A loaded run's agents as an :func:`evaluate` policy."""
    ids = torch.arange(agent.spec.n_agents, device=agent.device).unsqueeze(0)

    def act(obs: np.ndarray, w) -> np.ndarray:
        return agent.actor.act(torch.as_tensor(obs, device=agent.device), ids, deterministic).cpu().numpy()
    return act


def reference_policy(name: str, continuous: bool, n_agents: int, seed: int) -> Callable:
    """``random`` or ``greedy`` as an :func:`evaluate` policy."""
    rng = np.random.default_rng(seed)

    def act(obs: np.ndarray, w) -> np.ndarray:
        if name == "greedy":
            return greedy_actions(w, continuous)[None]
        return (rng.random((1, n_agents, 5), dtype=np.float32) if continuous
                else rng.integers(0, 5, (1, n_agents)))
    return act


def final_gain_threshold(r_random: float, finals: np.ndarray, share: float = 0.9) -> float:
    """``R_random + share * (mean final - R_random)``: the return a run must reach for steps-to-threshold."""
    return float(r_random + share * (np.mean(finals) - r_random))


def ratio_of_medians_ci(a: np.ndarray, b: np.ndarray, reps: int = 5000, seed: int = 0,
                        budget: Optional[float] = None) -> tuple[float, float, float]:
    """median(a) / median(b) with a 95% bootstrap CI (seeds resampled within each group).  NaNs (never reached)
    count as ``budget`` when given (the earliest they could have reached: a censored value, as in the sparse suite),
    else as +inf, where a resample with both medians infinite leaves the CI undefined (NaN)."""
    never = np.inf if budget is None else float(budget)
    a, b = np.nan_to_num(np.asarray(a, float), nan=never), np.nan_to_num(np.asarray(b, float), nan=never)
    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore", divide="ignore"):  # inf / inf (neither reached): NaN
        ratio = float(np.median(a) / np.median(b))
        boot = [np.median(rng.choice(a, len(a))) / np.median(rng.choice(b, len(b))) for _ in range(reps)]
    lo, hi = np.percentile(boot, [2.5, 97.5]) if np.all(np.isfinite(boot)) else (np.nan, np.nan)
    return ratio, float(lo), float(hi)


def budget_of(run_dir) -> Optional[int]:
    import json
    from pathlib import Path

    path = Path(run_dir) / "summary.json"
    return json.loads(path.read_text())["total_steps"] if path.exists() else None
