"""Per-agent training-health monitors (docs/algorithms.md: the health monitors, per agent).

Agent ``i`` has its own :class:`core.algo.health.PolicyCollapseMonitor` on its episode returns and its own
:class:`core.algo.health.ValueDivergenceMonitor` on its value error ``mean_t (R_t - V_old(s_t))^2`` over
each fresh rollout.  Remedies:

- collapse of agent i (counted only after warm-up: the best mean must have gained at least
  ``min_gain * |first mean|``, otherwise noise around a flat curve would fire it): restore agent i's policy from the snapshot taken at its best recent mean
  (with parameter sharing that is the whole shared actor) and enlarge ``eps_pi[i]`` by 50% (once per agent);
- divergence of agent i: halve the critic learning rate (one critic optimiser serves all agents)
  and enlarge ``eps_V[i]`` by 20%.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import torch

from core.algo.health import PolicyCollapseMonitor, ValueDivergenceMonitor
from dapo_ma.clips import AgentClips
from dapo_ma.networks import MAActor


def restore_agent(actor: MAActor, snapshot: dict, agent: int, shared: bool) -> None:
    """Load agent ``agent``'s policy parameters from ``snapshot`` (all of them when shared)."""
    if shared:
        actor.load_state_dict(snapshot)
        return
    state = actor.state_dict()
    for key, value in snapshot.items():
        if key.startswith(f"net.nets.{agent}."):
            state[key] = value.clone()
        elif key == "log_std":
            state[key][agent] = value[agent]
    actor.load_state_dict(state)


class AgentHealth:
    def __init__(self, n_agents: int, enabled: bool, collapse_window: int, collapse_drop: float,
                 min_gain: float, divergence_window: int, divergence_factor: float):
        self.enabled, self.min_gain = enabled, min_gain
        self.collapse = [PolicyCollapseMonitor(collapse_window, collapse_drop) for _ in range(n_agents)]
        self.divergence = [ValueDivergenceMonitor(divergence_window, divergence_factor) for _ in range(n_agents)]
        self.best_actor: list[dict] = [{} for _ in range(n_agents)]
        self.critic_lr_scale = 1.0

    def watch(self, actor: MAActor, clips: AgentClips, shared: bool, returns: np.ndarray,
              value_errors: np.ndarray) -> list[tuple[str, str]]:
        """Feed finished episodes' returns ``(n_episodes, A)`` and value errors ``(A,)``; apply the
        remedies and return the events as ``(name, detail)``."""
        if not self.enabled:
            return []
        events = []
        for i, (collapse, divergence) in enumerate(zip(self.collapse, self.divergence)):
            collapsed, new_best = collapse.observe(returns[:, i].tolist())
            if new_best:
                self.best_actor[i] = copy.deepcopy(actor.state_dict())
            first, best = collapse.fired_from
            warmed_up = collapsed and best - first >= self.min_gain * abs(first)
            if warmed_up and self.best_actor[i]:
                restore_agent(actor, self.best_actor[i], i, shared)
                clips.widen_policy(i)
                events.append(("policy_collapse", f"agent {i}: recent mean far below best {best:.2f}"))
            if not math.isnan(value_errors[i]) and divergence.observe(float(value_errors[i])):
                self.critic_lr_scale *= 0.5
                clips.widen_value(i, 1.2)
                events.append(("value_divergence", f"agent {i}: value error rose {divergence.window} updates in a row"))
        return events

    def state_dict(self) -> dict:
        return {"collapse": [m.state_dict() for m in self.collapse],
                "divergence": [m.state_dict() for m in self.divergence],
                "best_actor": self.best_actor, "critic_lr_scale": self.critic_lr_scale}

    def load_state_dict(self, s: dict) -> None:
        for m, state in zip(self.collapse, s["collapse"]):
            m.load_state_dict(state)
        for m, state in zip(self.divergence, s["divergence"]):
            m.load_state_dict(state)
        self.best_actor = [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in b.items()}
                           for b in s["best_actor"]]
        self.critic_lr_scale = s["critic_lr_scale"]
