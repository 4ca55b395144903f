"""Work types dispatch to the handler registered for the backend's kind."""

from dataclasses import dataclass

import pytest

from gpudissect.contract.backend import Backend, handles
from gpudissect.exceptions import DeviceUnavailable


@dataclass(frozen=True)
class _EchoWork:
    value: int


class _Fake(Backend):
    kind = "fake"

    def device_info(self):
        return {}

    def facts(self):
        raise NotImplementedError

    @property
    def supports_carveout(self):
        return False

    def run_chase(self, work, *, carveout_pct, seed=0):
        raise NotImplementedError

    def clocks(self):
        return {}


@handles("fake", _EchoWork)
def _echo(backend, work, *, factor=1):
    return work.value * factor


def test_registered_handler_runs():
    assert _Fake().run(_EchoWork(3), factor=2) == 6


def test_unregistered_work_is_refused_by_name():
    @dataclass(frozen=True)
    class Other:
        pass

    with pytest.raises(DeviceUnavailable, match="no handler for Other"):
        _Fake().run(Other())
