"""Layer 2, algo: the algorithms' pure parts (losses, advantages and GAE, DAPO's dynamic sampler, schedules, health
monitors, networks), usable on their own.  May import ``core.config`` only."""
