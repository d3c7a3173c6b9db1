"""Command-line interface: thin wrappers over the engine, sources and runtime."""
