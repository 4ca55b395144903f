"""What a twin assumes where the measured topology leaves a quantity undetermined.

Every default here is written into the generated profile with its reason, cited `assumed: ...`
(never silently), and config/README.md ("Digital twins of a measured GPU") lists them. They are
chosen so that the simulator reproduces what the run did measure: a walk that fits a cache of
the measured size still fits it (LRU, contiguous set index), a cache the run could not size is
larger than the largest array the run swept.
"""

from __future__ import annotations

# ways of a cache whose sets and ways the run left undetermined: an L1-level or constant cache of
# at most this many lines is fully associative (one set: every walk that fits the size hits at
# every stride, as the size and line tests assume; with contiguous sets a walk at twice the line
# uses half of them and reads as a longer line); the L2, or a larger cache, gets the largest
# power of two up to DEFAULT_MAX_WAYS that divides its lines (16, the associativity GPU
# simulators commonly assume for an L2 they cannot measure)
FULLY_ASSOCIATIVE_MAX_LINES = 2048
DEFAULT_MAX_WAYS = 16

POLICY = "lru"
POLICY_REASON = (
    "LRU: the run left the policy undetermined; under LRU a cyclic walk that fits the measured "
    "size hits, as the size sweeps saw"
)
INDEX_REASON = (
    "contiguous address bits above the line (the run left the set-index bits undetermined)"
)

# a cache whose line the run left undetermined takes the line of the cache before it on the path
DEFAULT_LINE_BYTES = 128

# clocks the driver did not report (a simulated device reports them in MHz)
DEFAULT_SM_MHZ = 1000.0
DEFAULT_MEMORY_MHZ = 1000.0
DEFAULT_MAX_WARPS_PER_SM = 64
DEFAULT_SMS = 1

# timing noise: the topology document keeps medians, not the spread of the samples
NOISE = {"jitter_cycles": 1.0, "outlier_probability": 0.0005, "outlier_cycles": 400}
NOISE_REASON = (
    "the topology document keeps medians, not the spread of the samples; 1 cycle of jitter and "
    "rare 400-cycle outliers as in the shipped twins (config/devices/)"
)

SHARED_CONFLICT_CYCLES = 2
# shared memory per SM where the driver reported none (a simulated device's run): CUDA's 48 KiB
# per block, which every GPU of compute capability 2.0 and later offers
SHARED_BYTES = 49152


def default_ways(lines: int, element: str = "") -> int:
    if element != "l2" and lines <= FULLY_ASSOCIATIVE_MAX_LINES:
        return lines
    ways = DEFAULT_MAX_WAYS
    while lines % ways:
        ways //= 2
    return ways
