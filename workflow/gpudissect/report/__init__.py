"""The report: Markdown assembled from result documents and figures, never from raw numbers."""
