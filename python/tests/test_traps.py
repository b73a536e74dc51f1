"""``ferrocuda.last_trap`` and ``ferrocuda.Trap`` without a GPU: nothing trapped, so there is
no record; bad device ordinals are refused; ``CudaError`` always has ``trap``. The records
themselves are tested on the GPU (``test_gpu_traps.py``) and, read back from host memory, in
the host crate (``driver::trap``'s unit test)."""

from __future__ import annotations

import pytest

import ferrocuda


def test_no_record_without_a_fault() -> None:
    assert ferrocuda.last_trap() is None
    assert ferrocuda.last_trap(0) is None
    assert ferrocuda.last_trap(device=63) is None


@pytest.mark.parametrize("bad", [64, 1 << 40])
def test_device_out_of_range_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="argument `device`"):
        ferrocuda.last_trap(bad)


def test_negative_device_is_refused() -> None:
    with pytest.raises(OverflowError):
        ferrocuda.last_trap(-1)


def test_trap_is_exported_and_not_constructible() -> None:
    assert "Trap" in ferrocuda.__all__ and "last_trap" in ferrocuda.__all__
    assert ferrocuda.Trap.__module__ == "ferrocuda"
    with pytest.raises(TypeError):
        ferrocuda.Trap()  # type: ignore[call-arg]
    # Read-only attributes (descriptors of the class), as the stub declares them.
    for name in ("device", "kernel", "file", "truncated", "line", "column", "block", "thread"):
        assert type(getattr(ferrocuda.Trap, name)).__name__ == "getset_descriptor", name


def test_cuda_errors_carry_a_trap_attribute() -> None:
    if ferrocuda.driver_available():
        pytest.skip("needs a machine without a CUDA driver (the error is the missing driver)")
    with pytest.raises(ferrocuda.CudaError) as e:
        ferrocuda.synchronize()
    assert e.value.code is None and e.value.trap is None
