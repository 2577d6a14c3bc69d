"""The sidecar process.

Upstream fetches, the bridge that owns the state shared by scrapes, the HTTP server, content
negotiation, gzip framing, self-metrics and background polls. With the simulator and the CLI, the
only room that imports aiohttp, asyncio or prometheus_client.
"""
