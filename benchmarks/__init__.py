"""Benchmarks that run the project end to end: scripts outside the installed package."""
