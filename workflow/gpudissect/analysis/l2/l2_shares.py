"""The contention phase's shares (`l2_slices`, step 3): a launch's duration over the one-slice
duration near it, a partner's median share, and the two questions the sweep asks after each
launch (which partners share the reference's slice, which to launch again)."""

from __future__ import annotations

import numpy as np
import pandas as pd

LOCAL_SELVES = 3  # one-line launches nearest a launch that give its one-slice duration
SAME_SHARE = 0.75  # halfway between two slices' 0.5 and one slice's 1.0 of the one-line time
AMBIGUOUS_BAND = 0.1  # a share this close to SAME_SHARE is launched again by the sweep
# two lines cannot take longer than one line alone (every warp on one slice): a launch above
# this share of the one-line time was disturbed (on an H100, bursts of launches at 1.1-2.5)
DISTURBED_SHARE = 1.05


def _shares(offset: np.ndarray, reference: np.ndarray, order: np.ndarray, ns: np.ndarray):
    """`contention_shares`' `self` and `share` of each launch, from its columns' arrays."""
    self_ = offset == reference
    at = order[self_]
    near = np.argsort(np.abs(order[:, None] - at[None, :]), axis=1, kind="stable")
    one = np.median(ns[self_][near[:, :LOCAL_SELVES]], axis=1)
    return self_, np.where(one > 0, ns / np.where(one > 0, one, 1), np.nan)


def contention_shares(frame: pd.DataFrame) -> pd.DataFrame:
    """One class search's launches (the rows of one reference) with `share`: the duration over
    the median of the `LOCAL_SELVES` launches of the reference beside itself nearest in launch
    order (the clocks may drift during a search); `self` marks those."""
    f = frame[["reference_offset_bytes", "offset_bytes", "order", "elapsed_ns"]].copy()
    f["self"], f["share"] = _shares(
        f["offset_bytes"].to_numpy(), f["reference_offset_bytes"].to_numpy(),
        f["order"].to_numpy(float), f["elapsed_ns"].to_numpy(float),
    )  # fmt: skip
    return f


def partner_shares(frame: pd.DataFrame) -> pd.Series:
    """Partner offset -> the median share of its launches beside the reference (a partner
    launched again where its first share was ambiguous or disturbed has several): of its
    undisturbed launches (share at most `DISTURBED_SHARE`) where it has any; the partners in
    the order of their first launch counted."""
    partners, values = _partner_medians(frame)
    index = pd.Index(partners, name="offset_bytes")
    return pd.Series(values, index=index, name="share", dtype=np.float64)


def _partner_medians(frame) -> tuple[np.ndarray, np.ndarray]:
    """`partner_shares` as arrays (partners, median shares) from the columns of `frame` (a
    DataFrame, or a dict of the columns' arrays: the sweep asks after every launch, where
    pandas' grouping, and even its frames, cost more than the launch)."""
    offset = np.asarray(frame["offset_bytes"], dtype=np.int64)
    self_, share = _shares(
        offset, np.asarray(frame["reference_offset_bytes"], dtype=np.int64),
        np.asarray(frame["order"], dtype=float), np.asarray(frame["elapsed_ns"], dtype=float),
    )  # fmt: skip
    offset, share = offset[~self_], share[~self_]
    clean = share <= DISTURBED_SHARE
    partners, group = np.unique(offset, return_inverse=True)
    has_clean = np.bincount(group, weights=clean, minlength=len(partners)) > 0
    kept = clean | ~has_clean[group]
    share, group = share[kept], group[kept]
    # each partner's median at once: its shares (NaN left out, as pandas' median does) sorted
    # within it, the middle one, or the mean of the middle two ((a + b) / 2, as numpy and
    # pandas take it); NaN where none is left
    valid = ~np.isnan(share)
    by = np.lexsort((share[valid], group[valid]))
    sorted_share = share[valid][by]
    counts = np.bincount(group[valid], minlength=len(partners))
    starts = np.cumsum(counts) - counts
    values = np.full(len(partners), np.nan)
    has = counts > 0
    lo, hi = (starts + (counts - 1) // 2)[has], (starts + counts // 2)[has]
    values[has] = (sorted_share[lo] + sorted_share[hi]) / 2
    # the partners in the order of their first counted launch (pandas' sort=False grouping)
    first_at = np.full(len(partners), len(group))
    np.minimum.at(first_at, group, np.arange(len(group)))
    first = np.argsort(first_at, kind="stable")
    return partners[first], values[first]


def contention_same(frame) -> dict[int, bool]:
    """Partner offset -> whether it shares the reference's slice (`SAME_SHARE`), for the
    launches of one reference (the sweep's question after each class search; `frame`: as
    `_partner_medians` takes it)."""
    partners, values = _partner_medians(frame)
    return dict(zip(partners.tolist(), (values > SAME_SHARE).tolist(), strict=True))


def contention_ambiguous(frame) -> list[int]:
    """The partners whose median share lies within `AMBIGUOUS_BAND` of `SAME_SHARE`, or above
    `DISTURBED_SHARE` (the sweep launches them again, `experiments.l2_slices.CONTENTION_RETRIES`
    times at most)."""
    partners, values = _partner_medians(frame)
    again = (np.abs(values - SAME_SHARE) < AMBIGUOUS_BAND) | (values > DISTURBED_SHARE)
    return partners[again].tolist()
