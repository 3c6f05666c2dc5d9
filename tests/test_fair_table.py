"""The equal-recipe MuJoCo table (experiments/fair_table.py): copied rows equal their committed sources, new recipe
rows merge in and survive a rebuild, and a column without runs says so."""
import csv

from experiments import fair_table as ft


def _source_rows(folder: str) -> list[dict]:
    with open(ft.RESULTS / folder / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_copied_rows_equal_their_sources():
    rows = ft.copied_rows()
    assert len(rows) == len(ft.SOURCES) * len(ft.COPIED) * len(ft.SEEDS)  # every env, label and seed, once
    for r in rows:
        there = [s for s in _source_rows(r["source"]) if s["env"] == r["env"] and s["seed"] == str(r["seed"])
                 and s["variant"] == ft.COPIED[r["variant"]]]
        assert len(there) == 1, r
        assert float(there[0]["final_return_mean"]) == r["final_return"]
        assert int(there[0]["total_steps"]) == r["total_steps"]


def test_recipe_labels():
    assert ft.algo_and_recipe("dapo-mechanisms-recipe") == ("dapo", "mujoco")
    assert ft.algo_and_recipe("grpo") == ("grpo", "cleanrl")
    assert ft.algo_and_recipe("dapo") == ("dapo", "dapo-mujoco")


def test_new_rows_merge_and_survive_a_rebuild(tmp_path):
    new = tmp_path / "fair.csv"
    with open(new, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["env", "variant", "seed", "total_steps", "final_return_mean"])
        w.writerow(["HalfCheetah-v5", "grpo-recipe", 1, 999424, 1234.5])
        w.writerow(["HalfCheetah-v5", "grpo", 1, 999424, 1.0])  # a CleanRL-settings row is never taken from --new
        w.writerow(["Hopper-v5", "grpo-recipe", 1, 999424, 2.0])  # an env outside the table is left out
    out = tmp_path / "fair"
    assert ft.main(["--new", str(new), "--out", str(out)]) == 0
    assert ft.main(["--out", str(out)]) == 0  # a rebuild keeps the merged runs
    rows = list(csv.DictReader(open(out / "results.csv", newline="")))
    mine = [r for r in rows if r["source"] == "fair runs"]
    assert [(r["variant"], r["seed"], float(r["final_return"])) for r in mine] == [("grpo-recipe", "1", 1234.5)]
    grpo = [r for r in rows if r["env"] == "HalfCheetah-v5" and r["variant"] == "grpo" and r["seed"] == "1"]
    assert grpo[0]["source"] == "mujoco_1M" and float(grpo[0]["final_return"]) != 1.0
    md = (out / "results.md").read_text()
    assert "| grpo | " in md and "1234 (1 run: no spread yet)" in md
    assert "not run" in md  # ppo-recipe has no runs


def test_a_run_of_another_budget_is_refused(tmp_path):
    import pytest

    new = tmp_path / "fair.csv"
    new.write_text("env,variant,seed,total_steps,final_return_mean\nHalfCheetah-v5,ppo-recipe,1,20480,5.0\n")
    with pytest.raises(SystemExit, match="20480"):
        ft.main(["--new", str(new), "--out", str(tmp_path / "fair")])
    assert not (tmp_path / "fair").exists()


def test_across_envs_counts_only_envs_every_column_ran():
    rows = [ft.row(env, label, seed, 100.0 * (label == "dapo-mechanisms-recipe") + (seed == 1), ft.BUDGET, "t")
            for env in ("HalfCheetah-v5", "Ant-v5") for label in ft.LABELS for seed in ft.SEEDS
            if not (env == "Ant-v5" and label == "grpo")]  # Ant lacks a column: it must not count
    md = "\n".join(ft.across_envs(rows))
    assert "(HalfCheetah-v5)" in md and "Ant-v5" not in md
    best = next(line for line in md.splitlines() if line.startswith("| dapo-mechanisms (mujoco recipe) |"))
    # normalised over [0, 101]: seeds 2-5 at 100/101 = 0.99, seed 1 at 1.00; IQM of the middle ones 0.99
    assert best.startswith("| dapo-mechanisms (mujoco recipe) | 0.99 [0.99, 1.00] | 1.00 | 5 |"), best
    assert "| ppo (mujoco recipe) | 0.00 [0.00, 0.01] | - | 5 |" in md  # 0 and 1/101 (seed 1)
    assert ft.across_envs([r for r in rows if r["env"] == "Ant-v5"]) == []  # no env with every column: no table


def test_the_readme_carries_the_committed_table():
    """The README's MuJoCo table is the one these rows make, line for line (numbers cannot drift from the CSV)."""
    from experiments.result_rows import read_rows

    readme = (ft.ROOT / "README.md").read_text().splitlines()
    table = ft.readme_table(read_rows(ft.RESULTS / "fair" / "results.csv"))
    assert len(table) == len(ft.SOURCES) + 3
    missing = [line for line in table if line not in readme]
    assert not missing, f"README.md lacks (python -m experiments.fair_table prints the table): {missing}"
