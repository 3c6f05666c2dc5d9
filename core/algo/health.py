"""Training health (docs/algorithms.md): monitors that each watch a statistic and name an event, and the one
controller (:class:`HealthController`) that applies their remedies for the single-agent (one agent) and the
multi-agent trainers (one monitor pair per agent):

- ``policy_collapse`` of agent i -> restore its policy from its best snapshot, enlarge its eps_pi by 50% (once;
  :mod:`core.algo.schedules`).  How a snapshot is taken and put back is the trainer's (a hook): the single-agent trainer
  refits the restored actor's input layer to the observation normaliser's current statistics, dapo_ma restores one
  agent's parameters (all of them under parameter sharing).
- ``value_divergence`` of agent i -> halve the critic learning rate (one critic optimiser), enlarge its eps_V by 20%.
- ``non_finite`` -> skip the update, restore the last healthy snapshot (:class:`NonFiniteGuard`).
"""
from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from core.algo.schedules import ClipSchedule

HEALTH_EVENTS = ("policy_collapse", "value_divergence", "non_finite")
CRITIC_LR_CUT = 0.5  # the divergence remedy halves the critic learning rate ...
EPS_V_WIDEN = 1.2    # ... and enlarges the diverging agent's eps_V by 20%
REMEDIES = {  # what each event's remedy did, in words for the console (docs/algorithms.md: health monitors)
    "policy_collapse": "restored the policy of the best recent returns and widened eps_pi by 50% (the first time)",
    "value_divergence": f"multiplied the critic learning rate by {CRITIC_LR_CUT} and eps_V by {EPS_V_WIDEN}",
    "non_finite": "skipped the update and restored the last finite weights",
}


def event_lines(events: Sequence[dict], most: int = 5) -> list[str]:
    """One line per health event ``{"step", "event", "detail"}`` saying what happened and what the remedy did; at
    most ``most``, then a count of the rest."""
    lines = [f"health: {e['event']} at step {e['step']} ({e['detail']}): {REMEDIES.get(e['event'], 'no remedy')}"
             for e in events[:most]]
    if len(events) > most:
        lines.append(f"health: {len(events) - most} more events in summary.json (health_event_log)")
    return lines

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


class HealthLog:
    """Counts per event name and the events themselves, ``{"step", "event", "detail"}`` each."""

    def __init__(self):
        self.counts = {name: 0 for name in HEALTH_EVENTS}
        self.events: list[dict] = []

    def record(self, step: int, name: str, detail: str) -> None:
        self.counts[name] += 1
        self.events.append({"step": step, "event": name, "detail": detail})

    def state_dict(self) -> dict:
        return {"counts": dict(self.counts), "events": list(self.events)}

    def load_state_dict(self, s: dict) -> None:
        self.counts, self.events = dict(s["counts"]), list(s["events"])


class HealthRecords:
    """A trainer's health bookkeeping (mixed into core's and dapo_ma's trainers): the counts and events of its
    :class:`HealthLog` ``health_log``, which the runners summarise and plot, and :meth:`_record` at its
    ``global_step``."""

    health_log: HealthLog
    global_step: int

    @property
    def health_counts(self) -> dict[str, int]:
        return self.health_log.counts

    @property
    def health_events(self) -> list[dict]:
        return self.health_log.events

    def _record(self, name: str, detail: str) -> None:
        self.health_log.record(self.global_step, name, detail)


@dataclass(frozen=True)
class HealthRules:
    """The monitors' options.  The families differ only in their values: the single-agent trainer sets
    ``significance`` and ``confirm`` (``--collapse-significance``, ``--collapse-confirm``) and has no warm-up
    (``min_gain`` 0 never binds: a collapse already needs a positive gain); dapo_ma keeps the monitor's default
    significance and no confirmation, and counts a collapse only after ``min_gain`` (``--collapse-min-gain``)."""

    enabled: bool
    collapse_window: int
    collapse_drop: float
    divergence_window: int
    divergence_factor: float
    significance: float = 4.0
    confirm: int = 0
    min_gain: float = 0.0

    @classmethod
    def from_config(cls, c) -> "HealthRules":
        """From a family config's health options; an option the family does not declare keeps its default here."""
        own = {k: getattr(c, f"collapse_{k}") for k in ("significance", "confirm", "min_gain")
               if hasattr(c, f"collapse_{k}")}
        return cls(bool(c.health_monitors), c.collapse_window, c.collapse_drop, c.divergence_window,
                   c.divergence_factor, **own)


class Messages(NamedTuple):
    """Event details, formatted with ``agent`` (index), ``best`` (the collapsed mean's best) and ``window``."""

    collapse: str
    divergence: str


class HealthController:
    """Per-agent collapse and divergence monitors and their remedies, for ``A`` agents (``A = 1``: the
    single-agent trainer).  Pure: the trainer passes two hooks, ``snapshot() -> S`` (called when an agent's
    recent mean reaches a new best) and ``restore(S, agent)`` (the collapse remedy), and feeds :meth:`watch`.
    Remedies act on ``clips`` (:class:`core.algo.schedules.ClipSchedule`) and ``critic_lr_scale``; events go to ``log``."""

    def __init__(self, n_agents: int, rules: HealthRules, clips: ClipSchedule, log: HealthLog,
                 snapshot: Callable[[], Any], restore: Callable[[Any, int], None], messages: Messages):
        self.rules, self.clips, self.log, self.messages = rules, clips, log, messages
        self.snapshot, self.restore = snapshot, restore
        self.collapse = [PolicyCollapseMonitor(rules.collapse_window, rules.collapse_drop, rules.significance,
                                               rules.confirm) for _ in range(n_agents)]
        self.divergence = [ValueDivergenceMonitor(rules.divergence_window, rules.divergence_factor)
                           for _ in range(n_agents)]
        self.best: list[Any] = [None] * n_agents  # each agent's snapshot at its best recent mean
        self.critic_lr_scale = 1.0

    def watch(self, step: int, returns, value_errors: Sequence[float]) -> list[tuple[str, str]]:
        """Feed the finished episodes' returns ``(n_episodes, A)`` and the update's value statistic ``(A,)`` (NaN:
        none); apply the remedies, log the events at ``step`` and return them as ``(name, detail)``."""
        if not self.rules.enabled:
            return []
        events = []
        for i, (collapse, divergence) in enumerate(zip(self.collapse, self.divergence)):
            collapsed, new_best = collapse.observe(returns[:, i].tolist())
            if new_best:
                self.best[i] = self.snapshot()
            first, best = collapse.fired_from
            warmed_up = collapsed and best - first >= self.rules.min_gain * abs(first)
            if warmed_up and self.best[i] is not None:  # restore the best policy, widen its clip (the first time)
                self.restore(self.best[i], i)
                self.clips.widen_policy(i)
                events.append(("policy_collapse", self.messages.collapse.format(agent=i, best=best)))
            if not math.isnan(value_errors[i]) and divergence.observe(float(value_errors[i])):
                self.critic_lr_scale *= CRITIC_LR_CUT
                self.clips.widen_value(i, EPS_V_WIDEN)
                events.append(("value_divergence", self.messages.divergence.format(agent=i, window=divergence.window)))
        for name, detail in events:
            self.log.record(step, name, detail)
        return events

    def state_dict(self) -> dict:
        return {"collapse": [m.state_dict() for m in self.collapse],
                "divergence": [m.state_dict() for m in self.divergence],
                "best": list(self.best), "critic_lr_scale": self.critic_lr_scale}

    def load_state_dict(self, s: dict) -> None:
        for m, state in zip(self.collapse, s["collapse"]):
            m.load_state_dict(state)
        for m, state in zip(self.divergence, s["divergence"]):
            m.load_state_dict(state)
        self.best = copy.deepcopy(list(s["best"]))  # the snapshots must not alias the loaded state's tensors
        self.critic_lr_scale = s["critic_lr_scale"]
