"""Layer 5, training: the trainer, the update (torch and NumPy), the training loop, checkpoints, metric logging
and data parallelism.  May import ``core.config``, ``core.algo``, ``core.envs`` and ``core.extensions``."""
