"""Benchmarks of tritonguard's hot paths against reference implementations, on captured data."""
