"""The digital twin of a real endpoint (issue 65: its own room, between tools and cli): discover the engine,
design the runs, run them, fit a twin from them, validate it on loads it never saw, and judge it.

Its ladder, lowest first: samples, curve → fit → checks, wake, discover, design → validate, heldout →
admission, slots → make.
"""
