"""What the multi-agent trainers add to core's health controller (:class:`core.algo.health.HealthController`, one
monitor pair per agent; docs/algorithms.md: the health monitors, per agent): how agent i's policy is put back, the
event texts, and the translation of checkpoints written before the one controller.

Agent ``i``'s collapse monitor watches its episode returns; its divergence monitor its value error
``mean_t (R_t - V_old(s_t))^2`` over each fresh rollout.  A collapse counts only after warm-up (``--collapse-min-gain``:
the best mean must have gained that share of ``|first mean|``, otherwise noise around a flat curve would fire it).
"""
from __future__ import annotations

from core.algo.health import Messages
from dapo_ma.networks import MAActor

MESSAGES = Messages("agent {agent}: recent mean far below best {best:.2f}",
                    "agent {agent}: value error rose {window} updates in a row")


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


def upgrade_health_state(s: dict) -> dict:
    """A checkpoint's ``"health"`` entry in the controller's layout: before it, the snapshots were ``best_actor``, with
    ``{}`` for an agent that had none yet.  (The ``"clips"`` entry kept its layout: ``pi_scale``, ``v_scale`` ``(A,)``.)"""
    if "best_actor" not in s:
        return s
    return {"collapse": s["collapse"], "divergence": s["divergence"], "critic_lr_scale": s["critic_lr_scale"],
            "best": [b or None for b in s["best_actor"]]}
