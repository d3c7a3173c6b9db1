"""Coverage-guided fuzzing of the parsers for long local runs (atheris); CI fuzzes with Hypothesis."""
