"""The L2 from footprint, flush and slice traces: levels, near and far partitions, the slice map."""
