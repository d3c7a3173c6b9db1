"""Clients: the only modules that import network SDKs (aiohttp, kubernetes, slack_sdk, prometheus_api_client)."""
