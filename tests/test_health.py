"""Training-health monitors (``core.algo.health``, docs/algorithms.md section 4.4).

PolicyCollapseMonitor: a hand-traced small case; fires on an injected drop (returns rise 0 -> 100,
then fall to ~10) and with negative returns (-1000 -> -200 -> -900); silent on a healthy noisy rising
curve, on a flat curve and on a noisy plateau; reports ``new_best``; empties its window after firing; with
``confirm`` it waits for fresh windows (by hand, on a Walker2d rollout of falls, mid-sighting round trip) and answers
like ``confirm=0`` until that fires.
ValueDivergenceMonitor: fires on a steadily exploding value loss, not on noisy bounded losses nor on
a monotone rise smaller than ``factor``.  ``all_finite`` on NaN / Inf / finite inputs.  The collapse
remedy's clip multiplier widens by 50% once and then stays.
"""
import math

import numpy as np
import pytest
import torch

from core.algo.schedules import widen_eps_pi_scale
from core.algo.health import PolicyCollapseMonitor, ValueDivergenceMonitor, all_finite


def _feed(monitor, returns, per_call=1):
    """Feed returns ``per_call`` episodes at a time; list of (call index, collapsed, new_best)."""
    out = []
    for k in range(0, len(returns), per_call):
        collapsed, new_best = monitor.observe(list(returns[k:k + per_call]))
        out.append((k // per_call, collapsed, new_best))
    return out


# --------------------------------------------------------------------------------------------
# Policy collapse
# --------------------------------------------------------------------------------------------

def test_collapse_hand_traced():
    """window 2, drop 0.5:
    [0, 0]     -> mean 0: window full, first mean m0 = 0, best -inf -> 0: new best
    [0, 100]   -> mean 50: new best
    [100, 100] -> mean 100: new best (gain over m0 = 100)
    [100, 40]  -> mean 70: drop 30 < 0.5*100 -> silent
    [40, 0]    -> mean 20: drop 80 >= 50 -> COLLAPSE, window emptied."""
    m = PolicyCollapseMonitor(window=2, drop=0.5)
    assert m.observe([0.0]) == (False, False)            # window not full yet
    assert m.observe([0.0]) == (False, True)
    assert m.observe([100.0]) == (False, True)
    assert m.observe([100.0]) == (False, True)
    assert m.best_mean == 100.0 and m.first_mean == 0.0
    assert m.observe([40.0]) == (False, False)
    assert m.observe([0.0]) == (True, False)
    assert len(m.recent) == 0


def test_collapse_fires_on_injected_drop_and_empties_window():
    """Returns rise linearly 0 -> 100 over 100 episodes, 4 per rollout (every full window is a new
    best), then collapse to 10 +- 1.  The window (10) is first full after 3 rollouts (episodes 2..11):
    m0 = 6.57; best m* = mean of the last ten = 95.45; threshold m <= 95.45 - 0.7*(95.45 - 6.57) = 33.2.
    Rollout 1 after the drop: (6 highs ~97.5 + 4 lows ~10)/10 ~ 62 -> silent;
    rollout 2: (2 highs ~99.5 + 8 lows)/10 ~ 28 -> COLLAPSE."""
    low = 10 + np.random.default_rng(0).uniform(-1, 1, 40)
    m = PolicyCollapseMonitor(window=10, drop=0.7)
    rise = _feed(m, np.linspace(0, 100, 100), per_call=4)
    assert not any(c for _, c, _ in rise)
    assert sum(nb for _, _, nb in rise) == 23               # every rollout from the 3rd on: snapshot
    assert m.observe(list(low[0:4])) == (False, False)
    assert m.observe(list(low[4:8])) == (True, False)
    # the window was emptied when firing: the next rollout (4 episodes < window) cannot fire again
    assert len(m.recent) == 0
    assert m.observe(list(low[8:12])) == (False, False)
    assert len(m.recent) == 4


def test_collapse_starts_over_after_firing():
    """window 2, drop 0.5: 0 -> 100 then 0 fires (m0 0, m* 100).  The restored policy then scores 60 and 20
    in turn: against the old m* = 100 the window mean 40 would fire again (drop 60 >= 50), but the monitor
    started over at the restored policy's first window (m0 = m* = 60), where 40 is no significant gain lost.
    A real collapse after a new gain still fires: 60 -> 200 -> 60 (gain 140, drop 140 >= 70)."""
    m = PolicyCollapseMonitor(window=2, drop=0.5)
    _feed(m, [0.0, 0.0, 100.0, 100.0])
    assert m.observe([0.0]) == (False, False) and m.observe([0.0]) == (True, False)
    assert math.isnan(m.first_mean) and len(m.recent) == 0 and m.fired_from == (0.0, 100.0)
    assert m.observe([60.0]) == (False, False) and m.observe([60.0]) == (False, True)  # the new start and best
    assert m.first_mean == m.best_mean == 60.0
    assert [c for _, c, _ in _feed(m, [20.0, 60.0, 20.0, 60.0])] == [False] * 4
    assert [c for _, c, _ in _feed(m, [200.0, 200.0, 60.0, 60.0])] == [False, False, False, True]


def test_collapse_negative_returns():
    """-1000 (x20) -> -200 (x20) -> -950, one episode per call: m0 = -1000, m* = -200, gain 800;
    it fires once the mean is <= -200 - 0.7*800 = -760.  After k episodes at -950 the mean is
    -200 - 75k: k = 7 -> -725 (silent), k = 8 -> -800 (fires)."""
    m = PolicyCollapseMonitor(window=10, drop=0.7)
    out = _feed(m, [-1000.0] * 20 + [-200.0] * 20)
    assert not any(c for _, c, _ in out)
    assert m.best_mean == -200.0 and m.first_mean == -1000.0
    calls = _feed(m, [-950.0] * 10)
    assert [k for k, c, _ in calls if c] == [7]             # the 8th episode at -950


def test_collapse_negative_returns_mild_dip_is_silent():
    """-1000 -> -200 -> -300: a dip of 100 against a gain of 800 is not a collapse."""
    m = PolicyCollapseMonitor(window=10, drop=0.7)
    out = _feed(m, [-1000.0] * 20 + [-200.0] * 20 + [-300.0] * 30)
    assert not any(c for _, c, _ in out)


def test_collapse_silent_on_flat_curve():
    """Constant returns: no gain, never a collapse, only the first full window is a 'best'."""
    m = PolicyCollapseMonitor(window=10, drop=0.7)
    out = _feed(m, [50.0] * 200, per_call=3)
    assert not any(c for _, c, _ in out)
    assert sum(nb for _, _, nb in out) == 1


def test_collapse_silent_on_healthy_noisy_rising_curve():
    """Returns rise 0 -> 100 over 400 episodes with N(0, 5) noise, 4 episodes per rollout (window 10,
    drop 0.7): a healthy run must never be reported as a collapse.  20 fixed seeds, so that a pass
    is not luck; the message lists (seed, rollout, best-minus-first gain when it fired)."""
    false_alarms = []
    for seed in range(20):
        r = np.linspace(0, 100, 400) + np.random.default_rng(seed).normal(0, 5, 400)
        m = PolicyCollapseMonitor(window=10, drop=0.7)
        for k in range(100):
            if m.observe(list(r[4 * k:4 * k + 4]))[0]:
                false_alarms.append((seed, k, round(float(m.best_mean - m.first_mean), 2)))
    assert false_alarms == [], f"false collapses (seed, rollout, gain): {false_alarms}"


def test_collapse_silent_on_noisy_plateau():
    """Returns flat at 50 with N(0, 5) noise (window 10, drop 0.7): noise on a plateau is no collapse."""
    r = 50 + np.random.default_rng(2).normal(0, 5, 400)
    m = PolicyCollapseMonitor(window=10, drop=0.7)
    fired = [k for k, c, _ in _feed(m, r, per_call=4) if c]
    assert fired == [], f"false collapse at {len(fired)} rollouts, first {fired[:5]}"


def test_collapse_confirm_waits_for_a_fresh_window():
    """window 2, drop 0.5, confirm 1; 0, 0, 100, 100 (m0 0, m* 100), then two episodes per call:
    [20, 20]   -> drop 80 >= 50: first sighting, no remedy yet (confirm=0 would fire here)
    [100, 100] -> a fresh window without the drop: the sighting is cancelled
    [20, 20]   -> a new first sighting
    [20]       -> the window shows the drop, but holds one fresh episode only: wait
    [20]       -> a second, fresh window with the drop: COLLAPSE."""
    assert _feed(PolicyCollapseMonitor(window=2, drop=0.5), [0.0, 0.0, 100.0, 100.0, 20.0, 20.0], per_call=2)[-1][1]
    m = PolicyCollapseMonitor(window=2, drop=0.5, confirm=1)
    _feed(m, [0.0, 0.0, 100.0, 100.0])
    assert m.observe([20.0, 20.0]) == (False, False) and m.seen_drops == 1
    assert m.observe([100.0, 100.0]) == (False, False) and m.seen_drops == 0
    assert m.observe([20.0, 20.0]) == (False, False) and m.seen_drops == 1
    assert m.observe([20.0]) == (False, False)
    assert m.observe([20.0]) == (True, False)
    assert m.fired_from == (0.0, 100.0) and len(m.recent) == 0 and m.seen_drops == 0


def test_collapse_confirm_cancelled_by_new_best():
    """A sighting followed by a window above the best is progress, not a collapse: new best, no remedy."""
    m = PolicyCollapseMonitor(window=2, drop=0.5, confirm=1)
    _feed(m, [0.0, 0.0, 100.0, 100.0])
    assert m.observe([20.0, 20.0]) == (False, False)
    assert m.observe([150.0, 150.0]) == (False, True) and m.seen_drops == 0 and m.best_mean == 150.0
    assert m.observe([120.0, 120.0]) == (False, False)  # drop 30 < 0.5 * 150


def test_collapse_confirm_ignores_one_rollout_of_falls():
    """Walker2d-v5, DAPO seed 4 at step 620k (1M-step benchmark): window 10, drop 0.7; m0 300, m* 5075, then one
    rollout ends ten episodes at 772 (falls; threshold m <= 5075 - 0.7 * 4775 = 1732.5) and the next five end two
    each at 2240, 1442, 2632, 5182, 3614 (that seed's GRPO run, identical until the fall).  confirm=0 fires on
    the falls; with confirm=1 the fresh window's mean 3022 has not lost 70% of the gain: silent."""
    head = [[300.0] * 10] + [[5075.0] * 2] * 5 + [[772.0] * 10]
    tail = [[r, r] for r in (2240.0, 1442.0, 2632.0, 5182.0, 3614.0)]
    fired = {}
    for confirm in (0, 1):
        m = PolicyCollapseMonitor(window=10, drop=0.7, confirm=confirm)
        fired[confirm] = [k for k, eps in enumerate(head + tail) if m.observe(eps)[0]]
    assert fired == {0: [len(head) - 1], 1: []}
    assert m.best_mean == 5075.0 and m.seen_drops == 0


def test_collapse_confirm_only_delays_or_cancels():
    """Until confirm=0 first fires, confirm=1 and 2 answer every call exactly as it does (their extra state only
    acts after a sighting, which confirm=0 would have answered by firing), and they never fire before it.  Noisy
    rising curves with injected dips, 2-5 episodes per call, 30 fixed seeds; most of them fire somewhere."""
    fired_any = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        r = np.linspace(0, 100, 600) + rng.normal(0, 8, 600)
        for start in rng.integers(100, 550, 3):
            r[start:start + rng.integers(3, 30)] = 5.0  # falls
        sizes = rng.integers(2, 6, 300)
        calls = np.split(r, np.cumsum(sizes)[np.cumsum(sizes) < len(r)])
        monitors = {k: PolicyCollapseMonitor(window=10, drop=0.7, confirm=k) for k in (0, 1, 2)}
        answers = {k: [m.observe(list(c)) for c in calls] for k, m in monitors.items()}
        first = next((i for i, (c, _) in enumerate(answers[0]) if c), len(calls))
        fired_any += first < len(calls)
        for k in (1, 2):
            assert answers[k][:first] == answers[0][:first], (seed, k)
    assert fired_any >= 10


def test_collapse_confirm_round_trip_mid_sighting():
    """A monitor saved between a sighting and its confirmation fires at the same call after loading."""
    m = PolicyCollapseMonitor(window=2, drop=0.5, confirm=1)
    _feed(m, [0.0, 0.0, 100.0, 100.0, 20.0, 20.0])
    n = PolicyCollapseMonitor(window=2, drop=0.5, confirm=1)
    n.load_state_dict(m.state_dict())
    assert (n.seen_drops, n.fresh) == (1, 0)  # sighted on the last call (window [20, 20])
    assert _feed(n, [20.0, 20.0]) == _feed(m, [20.0, 20.0]) == [(0, False, False), (1, True, False)]


def test_collapse_minimal_false_positive():
    """Minimal plateau case: ten episodes at 50 (m0 = 50), one at 52 (mean 50.2, new best, gain 0.2),
    one at 48 (mean 50.0).  A 0.4 % dip from the best is not 'far below its recent best'."""
    m = PolicyCollapseMonitor(window=10, drop=0.7)
    out = _feed(m, [50.0] * 10 + [52.0, 48.0])
    assert not any(c for _, c, _ in out)


def test_collapse_state_round_trip():
    """A monitor restored from ``state_dict`` mid-run reacts to the same tail exactly like the original;
    window 4, returns 0 x4 then 10 x5 (gain 10, best std 0), then zeros: it fires on the third zero (mean 2.5, std 4.33, noise sqrt(4.33^2/4) = 2.17, 4 * 2.17 < gain 10, drop 7.5 >= 5)."""
    rise, tail = [0.0] * 4 + [10.0] * 4, [0.0, 0.0, 0.0, 0.0]
    m = PolicyCollapseMonitor(window=4, drop=0.5)
    _feed(m, rise + [10.0])
    n = PolicyCollapseMonitor(window=4, drop=0.5)
    n.load_state_dict(m.state_dict())
    assert _feed(n, tail) == _feed(m, tail)
    fired = [k for k, c, _ in _feed(PolicyCollapseMonitor(4, 0.5), rise + [10.0] + tail) if c]
    assert fired == [len(rise) + 1 + 2]


# --------------------------------------------------------------------------------------------
# Value divergence
# --------------------------------------------------------------------------------------------

def test_divergence_fires_on_exploding_loss():
    """window 10, factor 10, losses 1, 2, 4, ..., 2^k: the 11th value (1024) completes 10 rises in a
    row and 1024 > 10 * 1 -> fires exactly there, then the history is emptied."""
    m = ValueDivergenceMonitor(window=10, factor=10.0)
    fired = [k for k in range(30) if m.observe(2.0 ** k)]
    assert fired[0] == 10
    assert fired == [10, 21]                                 # emptied: needs 11 fresh values again


def test_divergence_silent_on_noisy_bounded_loss():
    losses = np.random.default_rng(0).uniform(0.5, 2.0, 1000)
    m = ValueDivergenceMonitor(window=10, factor=10.0)
    assert not any(m.observe(float(x)) for x in losses)


def test_divergence_silent_on_small_monotone_rise():
    """Strictly rising but slow: 1.0, 1.1, ..., 20.9 -- never 10x the minimum of an 11-value window
    (at most 2.0 / 1.0), so it is not a blow-up."""
    m = ValueDivergenceMonitor(window=10, factor=10.0)
    assert not any(m.observe(1.0 + 0.1 * k) for k in range(200))


def test_divergence_needs_a_rise_every_update():
    """Exploding overall but with one dip inside every 11-value window: silent by definition of the rule."""
    m = ValueDivergenceMonitor(window=10, factor=10.0)
    seq = [2.0 ** k * (0.5 if k % 5 == 0 else 1.0) for k in range(1, 40)]
    assert not any(m.observe(x) for x in seq)


def test_divergence_state_round_trip():
    m = ValueDivergenceMonitor(window=3, factor=2.0)
    for x in (1.0, 2.0, 3.0):
        assert not m.observe(x)
    n = ValueDivergenceMonitor(window=3, factor=2.0)
    n.load_state_dict(m.state_dict())
    assert n.observe(4.0) and m.observe(4.0)                 # 1 < 2 < 3 < 4 and 4 > 2 * 1


# --------------------------------------------------------------------------------------------
# all_finite
# --------------------------------------------------------------------------------------------

def test_all_finite():
    assert all_finite([torch.tensor(1.0), torch.tensor([1.0, -2.0])])
    assert all_finite([])
    assert not all_finite([torch.tensor(1.0), torch.tensor([1.0, float("nan")])])
    assert not all_finite([torch.tensor(float("inf"))])
    assert not all_finite([torch.tensor([0.0, -math.inf])])
    net = torch.nn.Linear(3, 2)
    assert all_finite(net.parameters())
    with torch.no_grad():
        net.bias[1] = float("nan")
    assert not all_finite(net.parameters())


def test_non_finite_guard_restores_the_last_healthy_state():
    from core.algo.health import NonFiniteGuard

    net = torch.nn.Linear(2, 1)
    critic = torch.nn.Linear(2, 1)
    opt = torch.optim.Adam(list(net.parameters()) + list(critic.parameters()))
    guard = NonFiniteGuard(net, critic, opt)
    healthy = net.weight.detach().clone()
    with torch.no_grad():
        net.weight.fill_(float("nan"))
    assert guard.after_update(True) == "non-finite parameters"
    assert torch.equal(net.weight, healthy)
    with torch.no_grad():
        net.weight.add_(1.0)
    assert guard.after_update(True) == ""                      # healthy: becomes the new snapshot
    with torch.no_grad():
        net.weight.add_(5.0)
    assert guard.after_update(False) == "non-finite loss"      # restored to the +1 state
    assert torch.equal(net.weight, healthy + 1.0)


def test_collapse_remedy_widens_eps_pi_once():
    """x1.5 on the first collapse (0.2 -> 0.3), then capped: repeated collapses must not compound."""
    scale = 1.0
    for expected in (1.5, 1.5, 1.5):
        scale = widen_eps_pi_scale(scale)
        assert scale == expected
    assert widen_eps_pi_scale(0.5) == 0.75  # a scale below 1 still widens by 50%
    # dapo_ma's per-agent multipliers go through the same rule, element-wise
    per_agent = widen_eps_pi_scale(torch.tensor([1.0, 0.5, 1.5]))
    assert torch.equal(per_agent, torch.tensor([1.5, 0.75, 1.5]))


# ---------------------------------------------------------------------------------------------------------------------
# The one health controller (core.algo.health.HealthController): A = 1 (the single-agent trainer), A = 3 (dapo_ma)
# ---------------------------------------------------------------------------------------------------------------------
def _controller(n_agents, per_agent=True, **rules):
    """A controller over a clip schedule (clip 0.2, eps_V 0.5 -> 0.3) whose hooks record what they were asked."""
    from core.algo.schedules import ClipSchedule
    from core.algo.health import HealthController, HealthLog, HealthRules, Messages

    clips = ClipSchedule(n_agents, 0.2, 0.2, 0.2, True, True, 0.5, 0.3, "linear", per_agent)
    taken, restored = [], []

    def snapshot():
        taken.append(len(taken))
        return taken[-1]
    rules = HealthRules(**{"enabled": True, "collapse_window": 2, "collapse_drop": 0.5, "divergence_window": 2,
                           "divergence_factor": 10.0, **rules})
    health = HealthController(n_agents, rules, clips, HealthLog(), snapshot, lambda s, i: restored.append((s, i)),
                              Messages("agent {agent} best {best:.0f}", "agent {agent} window {window}"))
    return health, clips, taken, restored


@pytest.mark.parametrize("per_agent, widened", [(True, [0.2, 0.2, 0.3]), (False, [0.3, 0.3, 0.3])])
def test_controller_three_agents_agent_2_collapses(per_agent, widened):
    """Agents 0 and 1 flat at 0; agent 2 rises 0 -> 100 and falls back (window 2 of one episode per call).

    Agent 2's means: call 2: 0 (first, best: snapshot 0 for every agent), call 3: 50 (best, std 50: snapshot),
    call 4: 100 (best, std 0: snapshot), call 5: 50 (gain 100 < 4 noise units sqrt((0 + 50^2)/2) * 4 = 141: not
    significant), call 6: 0 (noise 0, lost 100 >= 0.5 * 100): collapse of agent 2 only.  Its restore gets the
    snapshot of call 4 (the fifth taken: 0, 1, 2 at call 2, then 3, 4); its eps_pi widens alone when clips are per agent,
    every agent's when they are shared."""
    health, clips, taken, restored = _controller(3, per_agent)
    no_errors = [math.nan] * 3
    for step, r in enumerate((0.0, 0.0, 100.0, 100.0, 0.0)):
        assert health.watch(step, np.array([[0.0, 0.0, r]]), no_errors) == []
    assert taken == [0, 1, 2, 3, 4]
    events = health.watch(5, np.array([[0.0, 0.0, 0.0]]), no_errors)
    assert events == [("policy_collapse", "agent 2 best 100")]
    assert restored == [(4, 2)]
    assert clips.ranges(0.0).eps_low.tolist() == pytest.approx(widened)
    assert health.log.counts["policy_collapse"] == 1 and health.log.events[-1]["step"] == 5


@pytest.mark.parametrize("per_agent, eps_v", [(True, [0.5, 0.6, 0.5]), (False, [0.6, 0.6, 0.6])])
def test_controller_three_agents_agent_1_diverges(per_agent, eps_v):
    """Agent 1's value error 1, 4, 20: rising over the window (2 updates) and 20 > 10 x its minimum 1: divergence.
    The critic lr halves (one critic optimiser) and agent 1's eps_V grows by 20% (every agent's when shared)."""
    health, clips, _, _ = _controller(3, per_agent)
    for step, error in enumerate((1.0, 4.0)):
        assert health.watch(step, np.zeros((0, 3)), [math.nan, error, math.nan]) == []
    assert health.watch(2, np.zeros((0, 3)), [math.nan, 20.0, math.nan]) == [("value_divergence", "agent 1 window 2")]
    assert health.critic_lr_scale == 0.5
    assert clips.ranges(0.0).eps_v.tolist() == pytest.approx(eps_v)


def test_controller_one_agent_confirmation_and_warm_up():
    """A = 1.  Two episodes a call, window 2: means 10, 100 (best), 12 (lost 88 >= 0.5 * 90).

    With ``confirm=1`` the drop must be seen again on a fresh window: the 4th call (12 again) fires.  With
    ``min_gain=0.2`` (dapo_ma's warm-up) the same fall from a best of 100 over a first mean of 90 (gain 10 < 0.2 * 90)
    is not counted: the monitor starts over, nothing is restored, the clip stays."""
    health, clips, _, restored = _controller(1, confirm=1)
    for step, r in enumerate((10.0, 100.0, 12.0)):
        assert health.watch(step, np.array([[r], [r]]), [math.nan]) == []
    assert health.watch(3, np.array([[12.0], [12.0]]), [math.nan]) == [("policy_collapse", "agent 0 best 100")]
    assert restored == [(1, 0)] and clips.ranges(0.0).scalars()[0] == pytest.approx(0.3)

    health, clips, _, restored = _controller(1, min_gain=0.2)
    for step, r in enumerate((90.0, 100.0, 90.0)):
        assert health.watch(step, np.array([[r], [r]]), [math.nan]) == []
    assert health.collapse[0].fired_from == (90.0, 100.0)  # it did fire, but before the warm-up gain
    assert restored == [] and clips.ranges(0.0).scalars()[0] == pytest.approx(0.2)


def test_controller_off_watches_nothing():
    health, clips, taken, _ = _controller(2, enabled=False)
    assert health.watch(0, np.array([[1.0, 1.0], [1.0, 1.0]]), [1.0, 1.0]) == []
    assert taken == [] and len(health.collapse[0].recent) == 0


def test_clip_schedule_single_agent_is_the_scalar_rule():
    """A = 1 in float64: the ranges are exactly min(eps * scale, EPS_PI_MAX) and eps_V(p) * scale in double precision;
    grpo's shared value clip is clip_eps * the policy scale; no value clip gives None."""
    from core.algo.schedules import EPS_PI_MAX, ClipSchedule

    c = ClipSchedule(1, 0.2, 0.15, 0.28, True, True, 0.5, 0.3, "linear", True, torch.float64)
    c.widen_policy(0)
    c.widen_value(0, 1.2)
    assert c.ranges(0.5).scalars() == (0.15 * 1.5, min(0.28 * 1.5, EPS_PI_MAX), (0.5 + (0.3 - 0.5) * 0.5) * 1.2)
    shared = ClipSchedule(1, 0.2, 0.2, 0.2, True, False, 0.5, 0.3, "linear", True, torch.float64)
    shared.widen_policy(0)
    assert shared.ranges(0.0).scalars()[2] == 0.2 * 1.5
    assert ClipSchedule(1, 0.2, 0.2, 0.2, False, True, 0.5, 0.3, "linear", True).ranges(0.0).eps_v is None
