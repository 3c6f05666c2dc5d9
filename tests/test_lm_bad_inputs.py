"""grpo-lm / dapo-lm bad inputs: one line on stderr, exit 2, nothing created (the pattern of test_bad_inputs.py);
--help lists the family's options grouped, on one screen or two."""
import os
from pathlib import Path

import pytest

from core.run.cli import main

REPO = Path(__file__).resolve().parents[1]
LM = ["run", "--algo", "dapo-lm"]
CASES = [
    (["run", "--algo", "dapo-lmm"], "did you mean 'dapo-lm'"),
    ([*LM, "--task", "division"], "invalid choice: 'division'"),
    ([*LM, "--group-size", "1"], "--group-size must be >= 2"),
    ([*LM, "--lr", "inf"], "--lr must be a finite number"),
    ([*LM, "--lr=-1e-4"], "--lr must be positive"),
    ([*LM, "--clip-eps-low", "1.5"], "--clip-eps-low must be < 1"),
    ([*LM, "--clip-eps-high", "nan"], "--clip-eps-high must be a finite number"),
    ([*LM, "--total-steps", "0"], "--total-steps must be in 1 .."),
    ([*LM, "--seed", str(2**40)], "--seed must be in 0 .."),
    ([*LM, "--max-new-tokens", "100000"], "beyond the sane limit"),
    ([*LM, "--overlong-buffer", "99"], "must not exceed --max-new-tokens"),
    ([*LM, "--n-embd", "100", "--n-head", "3"], "must be a multiple of --n-head"),
    ([*LM, "--num-minibatches", "1000"], "exceeds the 128 answers of a batch"),
    ([*LM, "--loss-aggregation", "sum"], "invalid choice: 'sum'"),
    ([*LM, "--device", "cuda"], "CUDA is not available"),
    ([*LM, "--model-dir", "/nonexistent/model"], "holds no config.json"),
    (["run", "--algo", "grpo-lm", "--overlong-buffer", "4"], "needs --soft-overlong-penalty"),
    (["run", "--algo", "grpo-lm", "--max-gen-rounds", "5"], "needs --dynamic-sampling"),
    ([*LM, "--warm-start-steps", "0", "--warm-start-lr", "1e-3"], "needs --warm-start-steps above 0"),
    ([*LM, "--recipe", "lm-nope"], "unknown recipe 'lm-nope'"),
    ([*LM, "--entropy-collapse", "2"], "--entropy-collapse must be < 1"),
    ([*LM, "--zero-variance-alert", "0"], "--zero-variance-alert must be in (0, 1]"),
    (["eval", "/nonexistent/run"], "not a run directory"),
]


@pytest.mark.parametrize("argv,expect", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_lm_input_gives_one_line_and_creates_nothing(tmp_path, monkeypatch, capsys, argv, expect):
    monkeypatch.chdir(tmp_path)
    repo_before = sorted(os.listdir(REPO))
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2, (code, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert expect in err, err
    assert list(tmp_path.iterdir()) == [], f"created: {list(tmp_path.iterdir())}"
    assert sorted(os.listdir(REPO)) == repo_before


def test_help_lists_the_lm_options_grouped(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--algo", "dapo-lm", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and len(out.splitlines()) <= 150
    for group in ("experiment:", "model:", "warm start:", "rollout:", "optimisation:", "objective:", "health:",
                  "runtime:"):
        assert f"\n{group}" in out, group
    for option in ("--task", "--clip-eps-high", "--loss-aggregation", "--[no-]dynamic-sampling",
                   "--[no-]filter-truncated", "--[no-]soft-overlong-penalty", "--group-size", "--model-dir"):
        assert option in out, option
