"""Multi-agent DAPO on PettingZoo (per-agent clip parameters over one shared buffer).

Not built yet: tracked by the dapo_ma issue (#5). The package exists so the layout is fixed."""
