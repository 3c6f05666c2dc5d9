"""Health monitors of RL on a language model: the failures users of GRPO/DAPO libraries report most.

Each watches one statistic of every RL update against its value at the first RL update (the warm-started
policy) or an absolute bound, and records a named event when the statistic *enters* the bad region (once per
excursion, not once per update): ``entropy_collapse`` (mean token entropy below ``entropy_collapse`` x the first;
the policy stops exploring, which clip-higher is meant to prevent), ``entropy_explosion`` (above
``entropy_explosion`` x the first: the policy is falling apart), ``length_drift`` (mean response length moved by
more than ``length_drift`` of the first), ``zero_variance_groups`` (most generated groups carry no signal: the task
is too easy or too hard), ``clip_low_saturated`` / ``clip_high_saturated`` (a clip bound binds on more than
``clip_alert`` of the tokens: steps too large).  They only detect; the events are logged and counted in
summary.json.
"""
from __future__ import annotations

import math

LM_EVENTS = ("entropy_collapse", "entropy_explosion", "length_drift", "zero_variance_groups", "clip_low_saturated",
             "clip_high_saturated")


class LMHealth:
    def __init__(self, cfg):
        self.cfg = cfg
        self.entropy0 = math.nan
        self.length0 = math.nan
        self.active = {name: False for name in LM_EVENTS}

    def check(self, entropy: float, length: float, zero_variance_share: float, clip_low: float,
              clip_high: float) -> list[str]:
        """The statistics of one update -> the events that start with it."""
        c = self.cfg
        if math.isnan(self.entropy0):
            self.entropy0, self.length0 = entropy, length
        bad = {
            "entropy_collapse": entropy < c.entropy_collapse * self.entropy0,
            "entropy_explosion": entropy > c.entropy_explosion * self.entropy0,
            "length_drift": abs(length - self.length0) > c.length_drift * self.length0,
            "zero_variance_groups": zero_variance_share > c.zero_variance_alert,
            "clip_low_saturated": clip_low > c.clip_alert,
            "clip_high_saturated": clip_high > c.clip_alert,
        }
        started = [name for name, now in bad.items() if now and not self.active[name]]
        self.active = bad
        return started

    def detail(self, name: str, entropy: float, length: float, zero_variance_share: float, clip_low: float,
               clip_high: float) -> str:
        """What an event saw, in words (the console's health line at the end of a run)."""
        return {"entropy_collapse": f"mean token entropy {entropy:.3g}, first {self.entropy0:.3g}",
                "entropy_explosion": f"mean token entropy {entropy:.3g}, first {self.entropy0:.3g}",
                "length_drift": f"mean answer length {length:.1f} tokens, first {self.length0:.1f}",
                "zero_variance_groups": f"{zero_variance_share:.0%} of the generated groups without reward spread",
                "clip_low_saturated": f"{clip_low:.0%} of the tokens at the lower clip",
                "clip_high_saturated": f"{clip_high:.0%} of the tokens at the upper clip"}[name]

    def state_dict(self) -> dict:
        return {"entropy0": self.entropy0, "length0": self.length0, "active": dict(self.active)}

    def load_state_dict(self, s: dict) -> None:
        self.entropy0, self.length0, self.active = float(s["entropy0"]), float(s["length0"]), dict(s["active"])
