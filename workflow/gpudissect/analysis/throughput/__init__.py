"""Copy throughput of global and shared memory."""
