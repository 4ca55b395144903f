"""The memory topology of a node of several GPUs: peer latency, caching, links."""
