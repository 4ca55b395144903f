"""The contract experiments and backends share, below both: the work types, the Backend protocol and
the device facts. Experiments describe work with it; backends execute it."""
