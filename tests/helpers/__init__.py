"""Helpers for tests that drive real child processes (crash and concurrency tests)."""
