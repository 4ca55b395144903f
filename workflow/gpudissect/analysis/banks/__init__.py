"""Shared-memory banks from strided-access latency sweeps: the gcd bank model."""
