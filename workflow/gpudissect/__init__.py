"""gpudissect: reverse-engineer GPU memory hierarchies with microbenchmarks."""

__version__ = "0.1.0"
