"""Which deployment: `harness plan` — candidates within a budget, each one's capacity at the SLOs, the front."""
