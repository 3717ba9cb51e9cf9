"""harness: a load-generating benchmark harness for LLM inference endpoints."""

__version__ = "0.1.0"
