"""Outstanding-request handling from Thread-Latency sweeps: spikes, the request table, repeated
sweeps' agreement."""
