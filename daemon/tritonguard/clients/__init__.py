"""Clients: the only modules importing network SDKs (aiohttp, kubernetes, slack_sdk, PromQL)."""
