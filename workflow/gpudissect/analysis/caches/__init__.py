"""Cache levels from P-chase traces: size, line, sector, sets, ways, replacement, the classic
methods, the L1's eviction sets, sharing and instances."""
