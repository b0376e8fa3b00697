"""Runnable examples of Chronicle workflows; each module runs with ``python -m examples.<name>``."""
