"""Benchmarks (`make bench`); not part of the application or the test suite."""
