"""Daemon runtime: asyncio supervisor, evaluator, dispatcher and HTTP endpoints."""
