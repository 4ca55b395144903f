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
# uses half of them and reads as a longer line); the L2, or a larger cache, gets about
# DEFAULT_MAX_WAYS ways (16, the associativity GPU simulators commonly assume for an L2 they
# cannot measure), chosen so that its set count spreads the line rule's walks
# (`default_geometry`)
FULLY_ASSOCIATIVE_MAX_LINES = 2048
DEFAULT_MAX_WAYS = 16
# the ways a larger cache may take so that its set count suits the line rule's strides (2, 3/2
# and 5/2 lines: `default_geometry`)
WAYS_RANGE = (8, 32)
STRIDE_FACTORS = (2, 3, 5)

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
    """Ways of a cache of `lines` lines with sets and ways undetermined in the Accel-Sim export:
    the largest power of two up to DEFAULT_MAX_WAYS dividing its lines (the twin's own profile
    uses `default_geometry`)."""
    if element != "l2" and lines <= FULLY_ASSOCIATIVE_MAX_LINES:
        return lines
    ways = DEFAULT_MAX_WAYS
    while lines % ways:
        ways //= 2
    return ways


def _crowding(sets: int) -> int:
    """How many of the line rule's stride factors 2, 3, 5 divide the set count."""
    return sum(sets % p == 0 for p in STRIDE_FACTORS)


def default_geometry(lines: int, element: str = "") -> tuple[int, int]:
    """(ways, sets) of a twin's cache of `lines` lines whose sets, ways and set index the run
    left undetermined; ways x sets may fall a few sets short of `lines` (the size is then
    rounded down to whole sets).

    The twin indexes such a cache by contiguous bits, set = line number mod S. The GPU's cache
    kept 7/8 of its lines at a stride of 2, 3/2 or 5/2 lines when the run measured its line
    (`analysis.caches.cache_line`), but mod S a stride of 2 lines uses half the sets when S is even,
    3/2 lines two thirds when 3 divides S, 5/2 lines two fifths when 5 divides S: a twin with S
    a multiple of 30 (16 ways of a 51609600-B L2 of 128-B lines: 25200 sets) fits none of the
    walks, and its run leaves the line undetermined. So: W ways from WAYS_RANGE dividing the
    lines whose S is not a multiple of 30, fewest of the factors 2, 3, 5 first, then the W
    nearest DEFAULT_MAX_WAYS; where no W divides the lines so, DEFAULT_MAX_WAYS ways and the
    largest S below lines / W prime to 30."""
    if (element != "l2" and lines <= FULLY_ASSOCIATIVE_MAX_LINES) or lines <= WAYS_RANGE[1]:
        return lines, 1
    exact = [
        (_crowding(lines // w), abs(w - DEFAULT_MAX_WAYS), w)
        for w in range(WAYS_RANGE[0], WAYS_RANGE[1] + 1)
        if lines % w == 0 and _crowding(lines // w) < len(STRIDE_FACTORS)
    ]
    if exact:
        ways = min(exact)[2]
        return ways, lines // ways
    sets = lines // DEFAULT_MAX_WAYS
    while _crowding(sets):
        sets -= 1
    return DEFAULT_MAX_WAYS, sets


# the address bits a twin's hashed index folds in (a 48-bit virtual address space)
ADDRESS_BITS = 48


def fold_masks(sets: int, line: int) -> list[int]:
    """XOR masks of `sets` (a power of two) sets: set bit i is the parity of the line-address
    bits i, i + k, i + 2k, ... (k = log2 sets) up to ADDRESS_BITS, so that a walk at any
    power-of-two stride spreads over the sets."""
    k, low = sets.bit_length() - 1, line.bit_length() - 1
    return [sum(1 << b for b in range(low + i, ADDRESS_BITS, k)) for i in range(k)]


def seeded_rng():
    """The generator of a twin's choices where the run measured a count, a share or a spread
    but not which addresses: a fixed seed, so one topology gives one profile."""
    import numpy as np

    return np.random.default_rng(0x7715)
