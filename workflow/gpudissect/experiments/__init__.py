"""Experiment families' sweeps. Each builds its work once; any backend executes it (see
`gpudissect.families` for how a family plugs into the pipeline)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa


def empty_frame(schema: pa.Schema) -> pd.DataFrame:
    """A trace with no rows (the device lacks what the experiment needs)."""
    return schema.empty_table().to_pandas()
