"""Layer 1, config: the options dataclasses and their checks (``ConfigError``), flag and YAML parsing, old configs'
translation, and the trust rule for envs that import code.  Imports no other layer of ``core`` (nor torch at module
level): everything else builds on it."""
