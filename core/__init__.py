"""DAPO toolkit core: losses, advantages, the dynamic sampler, schedules, health monitors and the
single-agent on-policy trainer shared by PPO, GRPO and DAPO."""

__version__ = "0.1.0"
