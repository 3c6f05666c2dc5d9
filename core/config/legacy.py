"""Options of earlier versions, translated when an old run directory (or a recorded config) is read.

Until the switch to recipes and extensions, the noise floor, the KL rule and the proximal clip were flat options
(``log_std_min``..., ``target_kl``/``kl_lr_max_scale``, ``proximal_clip``); they become ``extensions`` entries.
Options removed because their ablations lost are accepted only at the value that meant "off"; a run that used one
is refused with the commit that can still run it.  Options a saved null meant "off" for are read as off.
"""
from __future__ import annotations

import math
from typing import Any

from core.config.errors import ConfigError

LAST_COMMIT_WITH_REMOVED_OPTIONS = "c94a516"
# removed option -> the values that meant it was off (see experiments/results/MUJOCO.md for their ablations)
REMOVED = {"ent_below": (None,), "ent_per_dim": (None, False), "log_std_max": (None,),
           "log_std_min_anneal_end": (None, 1.0), "value_importance_correction": (None, False)}
# older options whose saved null meant the value that reproduces such a run
NULL_MEANS = {"collapse_confirm": 0, "eps_v_start": 0.5, "eps_v_schedule": "linear"}
# the weight cap runs with the old ``proximal_clip: true`` flag had: history, so it stays even if today's default
# (core.algo.proximal.PROXIMAL_WEIGHT_CAP, which this layer cannot import) ever moves
FLAG_PROXIMAL_WEIGHT_CAP = 2.0


def translate(values: dict[str, Any], where: str) -> dict[str, Any]:
    """An old single-agent config mapping in today's options (a new mapping; today's configs pass unchanged)."""
    v = dict(values)
    for name, off in REMOVED.items():
        if name in v and v.pop(name) not in off:
            raise ConfigError(f"{where} uses --{name.replace('_', '-')}, which was removed (its ablation lost); run it "
                              f"with the toolkit at commit {LAST_COMMIT_WITH_REMOVED_OPTIONS}")
    critic = v.pop("critic_hidden_sizes", None)
    if critic is not None and list(critic) != list(v.get("hidden_sizes", (64, 64))):
        raise ConfigError(f"{where} uses --critic-hidden-sizes, which was removed (its ablation lost); run it with "
                          f"the toolkit at commit {LAST_COMMIT_WITH_REMOVED_OPTIONS}")
    extensions = dict(v.get("extensions") or {})
    target, max_scale = v.pop("target_kl", None), v.pop("kl_lr_max_scale", None)
    if target:  # 0 or null: the KL rule was off
        extensions["kl_adaptive_lr"] = {"target": target, "max_scale": 10.0 if max_scale is None else max_scale}
    floor = v.pop("log_std_min", None)
    shape = {k: v.pop(f"log_std_min_{k}", None) for k in ("relative", "anneal", "anneal_start")}
    if floor is not None and floor != -math.inf:
        extensions["noise_floor"] = {"log_std_min": floor, "relative": bool(shape["relative"]),
                                     "anneal": bool(shape["anneal"]), "anneal_start": shape["anneal_start"] or 0.0}
    if v.pop("proximal_clip", None):
        extensions["proximal_clip"] = {"weight_cap": FLAG_PROXIMAL_WEIGHT_CAP}
    if extensions or "extensions" in v:
        v["extensions"] = extensions
    for name, value in NULL_MEANS.items():
        if name in v and v[name] is None:
            v[name] = value
    if v.get("joint_grad_clip") is None and v.get("separate_optimizers") is not None:  # before the option existed
        v["joint_grad_clip"] = not v["separate_optimizers"]
    if "recipe" in v and v["recipe"] is None:
        v["recipe"] = []
    return v
