"""Thin entry points of the magw daemons (console scripts); the logic is in ``magw.agent``."""
