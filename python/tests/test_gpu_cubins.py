"""GPU tests of the bundled cubins: the device loads the machine code of its major version
(an H100: the sm_90 cubin) instead of JIT-compiling the PTX, and the first launch in a fresh
process with the JIT cache disabled (``CUDA_CACHE_DISABLE=1``) takes under a second.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

import ferrocuda

pytestmark = pytest.mark.gpu

# The child: the context and arrays first, then the timed first launch (which loads the
# module) to its completion.
CHILD = """
import time
import numpy as np
import ferrocuda
a = ferrocuda.DeviceArray.from_numpy(np.ones(1024, np.float32))
out = ferrocuda.DeviceArray.empty(1024, np.float32)
a.synchronize()
start = time.perf_counter()
ferrocuda.kernels.add_f32(a, a, out)
out.synchronize()
seconds = time.perf_counter() - start
assert (out.to_numpy() == 2).all()
print(f"first launch: {seconds:.6f} s, {ferrocuda.bundled().loaded_image(0)}")
"""


def compute_capability(device: int = 0) -> tuple[int, int]:
    """The device's compute capability, from the driver."""
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuInit(0) == 0
    dev = ctypes.c_int()
    assert cuda.cuDeviceGet(ctypes.byref(dev), device) == 0
    major, minor = ctypes.c_int(), ctypes.c_int()
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
    assert cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) == 0
    assert cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) == 0
    return major.value, minor.value


def expected_image(cubins: list[str], cc: tuple[int, int]) -> str:
    """The rule of the host: the highest ``sm_AB`` with A the major version, B not above the
    minor; else the PTX."""
    best: int | None = None
    for arch in cubins:
        n = int(arch[3:])
        if n // 10 == cc[0] and n % 10 <= cc[1] and (best is None or n > best):
            best = n
    return "PTX" if best is None else f"sm_{best} cubin"


def test_bundled_module_loads_the_cubin_of_the_device(gpu: None) -> None:
    m = ferrocuda.bundled()
    cc = compute_capability()
    expected = expected_image(m.cubins, cc)
    # The base image first; a module with parts lists each part's after it.
    image = m.loaded_image(0)
    assert image.split("; ")[0] == expected, (cc, image)
    if cc == (9, 0):
        assert expected == "sm_90 cubin"
        assert "sm_90a part: sm_90a cubin" in image, image


def test_first_launch_in_a_fresh_process_is_fast(gpu: None) -> None:
    env = dict(os.environ)
    env["CUDA_CACHE_DISABLE"] = "1"
    r = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("first launch: "))
    seconds_text, image = line[len("first launch: ") :].split(" s, ")
    seconds = float(seconds_text)
    print(f"first launch in a fresh process (CUDA_CACHE_DISABLE=1): {seconds:.3f} s, {image}")
    expected = expected_image(ferrocuda.bundled().cubins, compute_capability())
    assert image.split("; ")[0] == expected, image
    if expected != "PTX":
        assert seconds < 1.0, f"{seconds:.3f} s with the {image}"
