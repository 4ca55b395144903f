"""TLBs from P-chase traces: reach, levels, pages, sets, the page-table window, controlled mappings
and the latency patterns P1-P6."""
