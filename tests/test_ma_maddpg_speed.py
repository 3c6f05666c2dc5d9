"""experiments/ma_maddpg_speed.py: the pairs' ratios and a tiny end-to-end run."""
import argparse

import pytest

from experiments import ma_maddpg_speed as speed


def test_report_gives_each_pairs_ratio_and_their_median():
    text = speed.report({"maddpg": [100.0, 200.0, 300.0], "dapo-maddpg": [90.0, 100.0, 330.0]},
                        argparse.Namespace(steps=20000, reps=3))
    assert "| 1 | 100 | 90 | 0.90 |" in text and "| 2 | 200 | 100 | 0.50 |" in text
    assert "Median ratio 0.90 (range 0.50-1.10)" in text


def test_bad_budget_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        speed.main(["--steps", "10"])
    assert e.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_tiny_side_by_side_run_writes_its_report(tmp_path):
    out = tmp_path / "speed.md"
    assert speed.main(["--steps", "2048", "--reps", "1", "--out", str(out)]) == 0
    assert "| 1 |" in out.read_text() and "Median ratio" in out.read_text()
