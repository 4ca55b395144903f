"""All errors gpudissect raises on purpose. Each message says what was wrong and how to fix it."""


class GpuDissectError(Exception):
    """Base class for every error the package raises on purpose."""


class ConfigError(GpuDissectError):
    """A config file is invalid: the message names the key, the value and what is allowed."""


class ProfileError(GpuDissectError):
    """A simulated device profile is invalid: the message names the field."""


class KernelCompileError(GpuDissectError):
    """nvcc failed: the message carries the command line and nvcc's output."""


class DeviceUnavailable(GpuDissectError):
    """No usable CUDA device (or pycuda is not installed) for a `cuda` device entry."""


class TraceError(GpuDissectError):
    """A trace file is missing, has the wrong schema or lacks its provenance metadata."""


class AnalysisError(GpuDissectError):
    """An analysis was given data it cannot work on (not the same as an undetermined result)."""
