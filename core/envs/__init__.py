"""Layer 3, envs: the Gymnasium family's environments (making them, rollout backends, Atari and MiniGrid; the rollout
with acting and normalisation, the collector process, mid-episode state). May import ``core.config`` and
``core.algo``."""
