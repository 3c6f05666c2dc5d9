"""Training-health monitors (docs/algorithms.md): each watches a statistic, names an event and suggests a remedy.

The monitors only *detect*; the trainer applies the remedies so that they stay testable in isolation:
- ``policy_collapse`` -> restore the actor from its best snapshot, enlarge eps_pi by 50% (once).  The
  restored actor's input layer is refit to the observation normaliser's current statistics
  (:func:`core.algo.networks.refit_input_layer`), so it is the best policy of the raw observation again.
- ``value_divergence`` -> halve the critic learning rate, enlarge eps_V by 20%.
- ``non_finite`` -> skip the update, restore the last healthy snapshot.
"""
from __future__ import annotations

import math
from collections import deque
from typing import Iterable

COLLAPSE_WIDEN = 1.5  # the collapse remedy enlarges eps_pi by 50% (docs/algorithms.md) ...
# ... at most once in a run: later collapses restore the best policy again but keep the clip.  Widening
# compounded otherwise: an Ant-v5 run (1M steps, DAPO with auto-lambda, seed 2) collapsed three times in
# 30k steps, then trained its last 560k steps at eps_pi 0.5 with an approx KL of 0.13-0.14 per update
# (0.03-0.05 in the same env's other seeds); the original definition names a clip below 0.05 or one bad update as the causes.
EPS_PI_MAX = 0.5  # and never beyond this absolute clip, whatever the configured one


def widen_eps_pi_scale(scale):
    """The collapse remedy's new eps_pi multiplier: ``min(scale * 1.5, 1.5)`` (a 0.2 clip becomes 0.3, then stays).

    ``scale`` is a float (the single-agent trainer) or a tensor of per-agent multipliers (``dapo_ma``)."""
    widened = scale * COLLAPSE_WIDEN  # capped at one widening of the configured clip
    return widened.clamp(max=COLLAPSE_WIDEN) if hasattr(widened, "clamp") else min(widened, COLLAPSE_WIDEN)


class PolicyCollapseMonitor:
    """Fires when recent returns lose most of a *significant* improvement.

    Let ``m`` (std ``s``) be the mean of the last ``window`` episode returns, ``m0`` its first value
    (once the window is full) and ``m*`` its best (std ``s*`` at that time), and
    ``se = sqrt((s*^2 + s^2) / window)`` the noise scale of a difference of two window means.  The
    monitor fires when the gain ``m* - m0`` exceeds ``significance * se`` (so noise on a plateau never
    counts as progress) and ``m* - m >= drop * (m* - m0)``: returns fell back most of the way towards
    where training started.  Measuring the drop relative to the gain works for negative returns too.
    After firing the monitor starts over: the window is emptied, and the restored policy's first full
    window becomes the new ``m0`` and ``m*``.  Against the old ``m*`` a best that was a lucky window (which
    the restored policy cannot repeat) fires restore after restore: an Ant-v5 run (1M steps, DAPO with
    weighted minibatches, seed 4) restored its best 24 times in its last 480k steps and ended at 138
    (its other four seeds 484-754).

    With ``confirm = k > 0`` a drop must be seen again on ``k`` further windows of *fresh* episodes (each
    disjoint from the last) before the monitor fires; a new best in between cancels it.  A walker that falls
    ends many short episodes at once, so one bad rollout can fill the window: in a Walker2d-v5 run (1M steps,
    DAPO, seed 4) ten falls in one rollout fired the monitor at step 620k, and the same run without monitors
    (GRPO, identical until then) was back at ~5200 within four rollouts and ended 5266 (3933 with the restore).
    """

    def __init__(self, window: int = 10, drop: float = 0.7, significance: float = 4.0, confirm: int = 0):
        self.window, self.drop, self.significance, self.confirm = window, drop, significance, confirm
        self.recent: deque[float] = deque(maxlen=window)
        self.first_mean = math.nan
        self.best_mean, self.best_std = -math.inf, 0.0
        self.seen_drops = 0  # windows that showed the drop since the last new best (the first plus confirmations)
        self.fresh = 0  # episodes since the last window that showed it
        self.fired_from = (math.nan, math.nan)  # (m0, m*) of the last firing, before the monitor started over

    def observe(self, episode_returns: Iterable[float]) -> tuple[bool, bool]:
        """Feed finished episodes; returns ``(collapsed, new_best)``; ``new_best`` means snapshot now."""
        episode_returns = list(episode_returns)
        self.recent.extend(episode_returns)
        self.fresh += len(episode_returns)
        if len(self.recent) < self.window:
            return False, False
        mean = sum(self.recent) / self.window
        std = math.sqrt(sum((r - mean) ** 2 for r in self.recent) / self.window)
        if math.isnan(self.first_mean):
            self.first_mean = mean
        if mean > self.best_mean:
            self.best_mean, self.best_std, self.seen_drops = mean, std, 0
            return False, True
        if self.seen_drops and self.fresh < self.window:
            return False, False  # a drop is pending confirmation: wait for a window of fresh episodes
        gain = self.best_mean - self.first_mean
        noise = math.sqrt((self.best_std ** 2 + std ** 2) / self.window)
        dropped = gain > self.significance * noise and self.best_mean - mean >= self.drop * gain
        self.seen_drops, self.fresh = (self.seen_drops + 1, 0) if dropped else (0, 0)
        if self.seen_drops > self.confirm:
            self.recent.clear()
            self.fired_from = (self.first_mean, self.best_mean)
            self.first_mean, self.best_mean, self.best_std, self.seen_drops = math.nan, -math.inf, 0.0, 0
            return True, False
        return False, False

    def state_dict(self) -> dict:
        return {"recent": list(self.recent), "first_mean": self.first_mean, "best_mean": self.best_mean,
                "best_std": self.best_std, "seen_drops": self.seen_drops, "fresh": self.fresh}

    def load_state_dict(self, s: dict) -> None:
        self.recent = deque(s["recent"], maxlen=self.window)
        self.first_mean, self.best_mean, self.best_std = s["first_mean"], s["best_mean"], s["best_std"]
        self.seen_drops, self.fresh = s.get("seen_drops", 0), s.get("fresh", 0)  # absent in older checkpoints


class ValueDivergenceMonitor:
    """Fires when the value loss rose in each of the last ``window`` updates *and* ended more than
    ``factor`` times its window minimum (a steady blow-up, not noise).  Empties its history on firing."""

    def __init__(self, window: int = 10, factor: float = 10.0):
        self.window, self.factor = window, factor
        self.history: deque[float] = deque(maxlen=window + 1)

    def observe(self, value_loss: float) -> bool:
        self.history.append(value_loss)
        if len(self.history) <= self.window:
            return False
        h = list(self.history)
        rising = all(b > a for a, b in zip(h, h[1:]))
        if rising and h[-1] > self.factor * min(h):
            self.history.clear()
            return True
        return False

    def state_dict(self) -> dict:
        return {"history": list(self.history)}

    def load_state_dict(self, s: dict) -> None:
        self.history = deque(s["history"], maxlen=self.window + 1)


def all_finite(tensors: Iterable) -> bool:
    """True when every tensor (e.g. a loss, or a module's parameters) is free of NaN and Inf."""
    import torch

    return all(bool(torch.isfinite(t).all()) for t in tensors)


class NonFiniteGuard:
    """Keeps the last healthy (actor, critic, optimizer) state and puts it back after an update that
    produced a non-finite loss or non-finite weights, so NaN/Inf never survive an update."""

    def __init__(self, actor, critic, optimizer):
        self.actor, self.critic, self.optimizer = actor, critic, optimizer
        self.last_good = self.snapshot()

    def snapshot(self) -> dict:
        import copy

        return copy.deepcopy({"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                              "optimizer": self.optimizer.state_dict()})

    def after_update(self, loss_was_finite: bool, agree=lambda ok: ok) -> str:
        """Restore and return a description if the update went non-finite, else snapshot and return "".
        ``agree`` combines the weight check across data-parallel ranks."""
        if not loss_was_finite:
            problem = "non-finite loss"
        elif not agree(all_finite(list(self.actor.parameters()) + list(self.critic.parameters()))):
            problem = "non-finite parameters"
        else:
            self.last_good = self.snapshot()
            return ""
        self.actor.load_state_dict(self.last_good["actor"])
        self.critic.load_state_dict(self.last_good["critic"])
        self.optimizer.load_state_dict(self.last_good["optimizer"])
        return problem
