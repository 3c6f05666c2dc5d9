"""dapo compare / core.compare: mean, IQM, stratified-bootstrap CIs and performance profiles of finished runs, checked
against numbers worked by hand and against experiments/stats.py (the same estimators and the same draws)."""
import json

import numpy as np
import pytest

from core.config.errors import ConfigError
from core.run.cli import main
from core.run.compare import compare, iqm
from experiments import stats

SCORES = {("dapo", "CartPole-v1"): [500.0, 480.0, 100.0, 490.0, 470.0],
          ("ppo", "CartPole-v1"): [300.0, 200.0, 250.0, 260.0],
          ("dapo", "Acrobot-v1"): [-80.0, -90.0, -85.0],
          ("ppo", "Acrobot-v1"): [-100.0, -120.0, -95.0]}


def fake_run(root, name, algo, env, score, recipe=(), eval_score=None):
    d = root / name
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"algo": algo, "env": env, "seed": 1, "final_return_mean": score,
                                                "eval_return_mean": score if eval_score is None else eval_score}))
    (d / "config.yaml").write_text(f"algo: {algo}\nenv: {env}\nrecipe: {list(recipe)}\n")
    (d / "metrics.csv").write_text(f"global_step,rollout/ep_return_mean\n100,{score}\n")
    return d


@pytest.fixture
def runs(tmp_path):
    return [fake_run(tmp_path, f"{algo}_{env}_{i}", algo, env, s)
            for (algo, env), scores in SCORES.items() for i, s in enumerate(scores)]


def test_per_env_tables_match_hand_and_experiments_stats(runs, tmp_path):
    result = compare(runs, by="algo", reps=500, seed=3, out=tmp_path / "out")
    assert [t.task for t in result.tables] == ["CartPole-v1", "Acrobot-v1"]  # different envs are never pooled raw
    dapo = result.tables[0].groups["dapo"]
    assert dapo.runs == 5 and dapo.mean == pytest.approx(408.0, abs=1e-12)
    assert dapo.iqm == pytest.approx((470 + 480 + 490) / 3, abs=1e-12)  # 5 runs: one cut from each end
    ppo = result.tables[0].groups["ppo"]
    assert ppo.iqm == pytest.approx((250 + 260) / 2, abs=1e-12)
    for (algo, env), scores in SCORES.items():
        g = result.tables[[t.task for t in result.tables].index(env)].groups[algo]
        assert g.iqm == pytest.approx(stats.iqm(scores), abs=1e-9)
        for stat, ci in ((stats.iqm, g.iqm_ci), (np.mean, g.mean_ci)):
            expected = stats.stratified_bootstrap_ci({env: scores}, stat, reps=500, seed=3)
            assert ci == pytest.approx(expected, abs=1e-9)
    # the performance profile: share of runs scoring above tau (taus from the table's lowest to highest score)
    t = result.tables[0]
    assert t.taus[0] == 100.0 and t.taus[-1] == 500.0
    assert dapo.profile[0] == pytest.approx(4 / 5) and ppo.profile[0] == 1.0 and dapo.profile[-1] == 0.0
    tau_index = t.taus.index(min(t.taus, key=lambda x: abs(x - 256)))  # tau = 256 on the grid
    assert t.taus[tau_index] == 256.0 and ppo.profile[tau_index] == pytest.approx(2 / 4)
    assert all(lo <= p <= hi for lo, p, hi in zip(*dapo.profile_ci[:1], dapo.profile, dapo.profile_ci[1]))
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"compare.md", "compare.json", "compare.png"}
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "## CartPole-v1" in md and "| dapo | 5 | 408 |" in md
    assert json.loads((tmp_path / "out" / "compare.json").read_text())["tables"][1]["groups"]["ppo"]["runs"] == 3


def test_normalised_scores_pool_envs_with_env_strata(runs):
    norm = {"CartPole-v1": (0.0, 500.0), "Acrobot-v1": (-500.0, 0.0)}
    result = compare(runs, by="algo", norm=norm, reps=300, seed=0)
    assert [t.task for t in result.tables] == ["normalised"]
    for algo in ("dapo", "ppo"):
        strata = {env: [(s - norm[env][0]) / (norm[env][1] - norm[env][0]) for s in scores]
                  for (a, env), scores in SCORES.items() if a == algo}
        g = result.tables[0].groups[algo]
        flat = np.concatenate(list(strata.values()))
        assert g.mean == pytest.approx(flat.mean(), abs=1e-12) and g.iqm == pytest.approx(stats.iqm(flat), abs=1e-12)
        assert g.iqm_ci == pytest.approx(stats.stratified_bootstrap_ci(strata, stats.iqm, reps=300), abs=1e-9)
        assert g.mean_ci == pytest.approx(stats.stratified_bootstrap_ci(strata, np.mean, reps=300), abs=1e-9)
        # profile: per-env shares of runs above tau, averaged over the envs (rliable's stratified profile)
        tau = result.tables[0].taus[50]
        expected = np.mean([np.mean(np.asarray(v) > tau) for v in strata.values()])
        assert g.profile[50] == pytest.approx(expected, abs=1e-12)


def test_by_recipe_and_env_and_no_ci(tmp_path):
    a = [fake_run(tmp_path, f"a{i}", "dapo", "CartPole-v1", 10.0 * i, recipe=("fast",)) for i in range(3)]
    b = [fake_run(tmp_path, "b0", "dapo", "CartPole-v1", 5.0)]
    result = compare(a + b, by="recipe", reps=0)
    groups = result.tables[0].groups
    assert set(groups) == {"fast", "(none)"} and groups["fast"].mean == 10.0 and groups["(none)"].mean_ci is None
    assert "IQM 95% CI" not in result.markdown()
    assert set(compare(a + b, by="env", reps=0).tables[0].groups) == {"CartPole-v1"}
    assert iqm([1.0, 2.0, 3.0]) == 2.0  # fewer than 4: nothing cut


def test_cli_prints_the_table_and_writes_files(runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", *map(str, runs), "--reps", "200", "--out", str(out), "--metric", "eval_return_mean"]) == 0
    printed = capsys.readouterr().out
    assert "| algo | runs | mean | mean 95% CI | IQM | IQM 95% CI |" in printed and "compare.png" in printed
    assert (out / "compare.png").stat().st_size > 1000


@pytest.mark.parametrize("case", ["not_a_run", "one_run_in_group", "unknown_by", "out_is_file", "bad_norm",
                                  "norm_missing_env", "missing_metric"])
def test_bad_input_is_one_line_and_exit_2(case, runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    args = ["compare", *map(str, runs[:9])]  # CartPole-v1 runs only
    if case == "not_a_run":
        (tmp_path / "empty").mkdir()
        args.append(str(tmp_path / "empty"))
    elif case == "one_run_in_group":
        args.append(str(fake_run(tmp_path, "lone", "grpo", "CartPole-v1", 1.0)))
    elif case == "unknown_by":
        args += ["--by", "colour"]
    elif case == "out_is_file":
        out.write_text("x")
    elif case == "bad_norm":
        args += ["--norm", "CartPole-v1=1:1"]
    elif case == "norm_missing_env":
        args += ["--norm", "Acrobot-v1=0:1"]
    elif case == "missing_metric":
        args += [str(fake_run(tmp_path, "noeval", "dapo", "CartPole-v1", 1.0, eval_score=float("nan"))),
                 "--metric", "eval_return_mean"]
    args += ["--out", str(out)]
    with pytest.raises(SystemExit) if case == "unknown_by" else _nothing() as raised:
        code = main(args)
    code = raised.value.code if case == "unknown_by" else code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not out.is_dir()  # nothing written


def test_api_refuses_with_config_error(runs):
    import core

    with pytest.raises(ConfigError, match="at least 2 runs"):
        core.compare(runs[:5] + [runs[9]], by="algo")  # Acrobot's dapo group has one run
    assert core.compare(runs[:9], by="algo", reps=0).to_dict()["tables"][0]["groups"]["ppo"]["runs"] == 4


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_estimates_agree_with_rliable():
    """The point estimates equal rliable's (Agarwal et al. 2021's library) and the stratified-bootstrap percentile CIs
    agree within bootstrap noise (different random streams, 4000 resamples each, fixed seeds: deterministic)."""
    rly = pytest.importorskip("rliable.library")
    from rliable import metrics

    from core.run.compare import group_stats

    rng = np.random.default_rng(3)
    scores = rng.normal([1.0, 3.0, 2.0], [0.5, 1.5, 0.2], size=(7, 3))      # (runs, envs), rliable's layout
    taus = np.linspace(0.0, 4.0, 9)
    ours = group_stats({f"env{k}": scores[:, k] for k in range(3)}, taus, reps=4000, seed=0)
    assert ours.mean == pytest.approx(metrics.aggregate_mean(scores), abs=1e-12)
    assert ours.iqm == pytest.approx(metrics.aggregate_iqm(scores), abs=1e-12)
    theirs_profile, _ = rly.create_performance_profile({"x": scores}, taus)
    np.testing.assert_allclose(ours.profile, theirs_profile["x"], atol=1e-12)
    np.random.seed(0)  # rliable's bootstrap draws from NumPy's global stream
    _, cis = rly.get_interval_estimates({"x": scores}, lambda s: np.array([metrics.aggregate_mean(s),
                                                                          metrics.aggregate_iqm(s)]), reps=4000)
    (mean_lo, iqm_lo), (mean_hi, iqm_hi) = cis["x"]
    spread = scores.max() - scores.min()
    for (lo, hi), (tlo, thi) in ((ours.mean_ci, (mean_lo, mean_hi)), (ours.iqm_ci, (iqm_lo, iqm_hi))):
        assert abs(lo - tlo) < 0.02 * spread and abs(hi - thi) < 0.02 * spread, ((lo, hi), (tlo, thi))
