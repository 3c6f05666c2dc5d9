"""A user's own Gymnasium environment, as a module on PYTHONPATH (used by tests/test_api.py).

Importing it registers ``Reach-v0`` (so ``--env mymod:Reach-v0`` works); ``make_env`` and ``ReachEnv`` are the
factory and the class (``--env mymod:make_env`` or ``--env mymod.ReachEnv``).
"""
import gymnasium as gym
import numpy as np


class ReachEnv(gym.Env):
    """Walk to a target on a line of ``size`` cells: actions left / stay / right, reward 1 on the target, else
    -0.1; the episode ends on the target or after ``max_steps``."""

    def __init__(self, size: int = 5, max_steps: int = 20):
        self.size, self.max_steps = size, max_steps
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.pos, self.target, self.steps = 0, 0, 0

    def _obs(self):
        return np.array([self.pos, self.target], np.float32) / (self.size - 1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.target = (int(x) for x in self.np_random.integers(0, self.size, 2))
        self.steps = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = int(np.clip(self.pos + int(action) - 1, 0, self.size - 1))
        self.steps += 1
        reached = self.pos == self.target
        return self._obs(), 1.0 if reached else -0.1, reached, self.steps >= self.max_steps, {}


def make_env(size: int = 5, max_steps: int = 20) -> gym.Env:
    return ReachEnv(size, max_steps)


gym.register(id="Reach-v0", entry_point=ReachEnv)
