"""The files one training iteration runs (issue #54's measure, experiments/read_path.py): the house keeps one update
readable in a handful of files.  Fails when an iteration starts running code in more files than the redesign left."""
from experiments.read_path import files_run

# One DAPO iteration on CPU MLPs (NumPy acting and update): trainer, rollout (+acting, normalisers), backends, the
# NumPy policy maths, advantages, sampler, NumPy update, schedules, health, and the data-parallel no-ops.
MOST_FILES = 10


def test_one_dapo_iteration_runs_code_in_at_most_ten_files():
    files = files_run("CartPole-v1")
    assert {"core/training/trainer.py", "core/envs/rollout.py", "core/algo/sampler.py",
            "core/training/numpy_update.py", "core/algo/health.py"} <= set(files), files
    assert len(files) <= MOST_FILES, files


def test_the_torch_update_reads_the_documented_losses():
    """With the torch backend the update runs core/algo/losses.py, the reference the NumPy backend is tested against."""
    files = files_run("CartPole-v1", extra={"numpy_update": False})
    assert {"core/training/update.py", "core/algo/losses.py"} <= set(files), files
    assert "core/training/numpy_update.py" not in files
