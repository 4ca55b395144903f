"""Whether the measurement itself can be trusted: steady clocks and the timed window's overhead."""
