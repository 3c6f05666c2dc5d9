import pytest


@pytest.fixture
def small_config():
    """A tiny, fast CartPole config factory: options as given on the command line, resolved through the recipes
    (no progress/TensorBoard/eval)."""
    from core.run.runner import resolve_for_env

    def make(tmp_path, **overrides):
        base = dict(env="CartPole-v1", algo="dapo", total_steps=2048, num_envs=4, num_steps=64, num_epochs=2,
                    num_minibatches=4, progress=False, tensorboard=False, eval_episodes=0, run_dir=str(tmp_path))
        return resolve_for_env({**base, **overrides})
    return make


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu",
                     help="torch device of tests/test_device.py: cpu (default) or cuda (experiments/gpu_check.sh)")


@pytest.fixture
def device(request):
    """The ``--device`` the device tests run on (their references are computed on the CPU)."""
    import torch

    name = request.config.getoption("--device")
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.fail(f"--device {name}: CUDA is not available")
    return torch.device(name)
