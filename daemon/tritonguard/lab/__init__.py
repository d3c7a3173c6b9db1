"""Fault lab: a real Triton server driven into each cause of the catalogue, for tests and demo."""
