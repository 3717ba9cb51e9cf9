"""Reporters: the terminal table and the files of a run directory."""
