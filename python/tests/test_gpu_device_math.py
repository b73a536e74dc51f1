"""Accuracy of ``ferrocuda_device::math`` on the GPU, against mpmath at 50 digits.

The kernels are ``tests/device-kernels``' ``math_<method>_<type>`` and ``fast_<method>_f32``
(one per function and type), loaded with ``ferrocuda.load`` from ``$FERROCUDA_DEVICE_KERNELS``,
the GPU bundle's ``.gpu/device-kernels/`` or a local build under ``target/tmp``. Every
function is evaluated on random inputs across its domain (log-uniform magnitudes, both signs)
and on edge cases (±0, subnormals, ±inf, NaN, huge arguments, domain boundaries). For each
output the reference is the correctly rounded value of the mpmath result (50 digits) in the
output's type; the error is the distance in ulps between the two (as the CUDA Programming
Guide states its bounds), and its maximum must not exceed the bound that
``device/src/math.rs``'s ``ACCURACY_BOUNDS`` lists (the CUDA Math API's published bound).
Special values (NaN, ±inf, signed zeros) must be exactly C99 Annex F's, as NumPy computes
them. The maximum errors are written to ``$OUT/device_math_accuracy.json`` (``OUT`` is set by
``.gpu/run.sh``) and printed.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import device_kernels
import ferrocuda
from ferrocuda import _config

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
RESULTS: dict[str, dict[str, Any]] = {}
N_RANDOM = _config.count("FERROCUDA_MATH_SAMPLES", 1500)


def _manifest() -> Path | None:
    return device_kernels.manifest()


def _bounds() -> dict[str, tuple[int, int]]:
    """``ACCURACY_BOUNDS`` of device/src/math.rs (shipped next to the bundled manifest)."""
    path = device_kernels.source("math.rs", REPO / "device" / "src" / "math.rs")
    if path is None:
        pytest.skip("device/src/math.rs (ACCURACY_BOUNDS) not found")
    text = path.read_text()
    table = text[text.index("ACCURACY_BOUNDS") :]
    table = table[: table.index("];")]
    return {m: (int(a), int(b)) for m, a, b in re.findall(r'\("(\w+)", (\d+), (\d+)\)', table)}


@pytest.fixture(scope="module")
def mp() -> Any:
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    return mpmath


@pytest.fixture(scope="module")
def mod(gpu: None) -> Any:
    path = _manifest()
    if path is None:
        pytest.skip(
            "the device test kernels are not built (bundle them with scripts/gpu-bundle.sh)"
        )
    return ferrocuda.load(path)


@pytest.fixture(scope="module")
def bounds() -> dict[str, tuple[int, int]]:
    return _bounds()


# ---------------------------------------------------------------------------------------
# Correct rounding and ulp distance


def _round_to(mp: Any, v: Any, dtype: Any) -> float:
    """``v`` (an mpf) correctly rounded to ``dtype`` (nearest, ties to even)."""
    info = np.finfo(dtype)
    prec = info.nmant + 1
    if v == 0:
        return 0.0
    if abs(v) >= mp.mpf(2) ** (info.maxexp):  # beyond the largest finite value's binade
        return math.copysign(math.inf, float(mp.sign(v)))
    min_exp = info.minexp  # smallest normal exponent
    e = int(mp.floor(mp.log(abs(v), 2))) if v != 0 else min_exp
    if e < min_exp:  # subnormal: a multiple of 2^(min_exp - nmant)
        q = mp.mpf(2) ** (min_exp - info.nmant)
        r = mp.nint(v / q) * q  # nint rounds half to even
        return float(r)
    with mp.workprec(prec):
        r = +v
    r = float(r)
    return r if abs(r) <= float(info.max) else math.copysign(math.inf, r)


def _ordered(x: float, dtype: Any) -> int:
    """An integer that orders floats of ``dtype`` as they order on the real line."""
    if dtype == np.float32:
        (b,) = struct.unpack("<i", struct.pack("<f", x))
        return b if b >= 0 else -(b & 0x7FFFFFFF)
    (b,) = struct.unpack("<q", struct.pack("<d", x))
    return b if b >= 0 else -(b & 0x7FFFFFFFFFFFFFFF)


def _ulps(got: float, want: float, dtype: Any) -> float:
    if math.isnan(want) or math.isnan(got):
        return 0.0 if math.isnan(want) and math.isnan(got) else math.inf
    if math.isinf(want) or math.isinf(got):
        if got == want:
            return 0.0
        # An infinite correctly rounded value: distance from the largest finite value, + 1.
        big = float(np.finfo(dtype).max)
        g = math.copysign(big, got) if math.isinf(got) else got
        w = math.copysign(big, want) if math.isinf(want) else want
        return abs(_ordered(g, dtype) - _ordered(w, dtype)) + 1
    return float(abs(_ordered(got, dtype) - _ordered(want, dtype)))


# ---------------------------------------------------------------------------------------
# Functions: reference (mpmath), C99 special values (NumPy), domains


def _real(mp: Any, f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` with a complex or failed result as NaN (a domain error)."""

    def g(*a: Any) -> Any:
        try:
            r = f(*a)
        except (ValueError, ZeroDivisionError):
            return None
        if isinstance(r, mp.mpc):
            return None if r.imag != 0 else r.real
        return r

    return g


def _cbrt(mp: Any, x: Any) -> Any:
    return mp.sign(x) * mp.cbrt(abs(x))


def _erfc(mp: Any, x: Any) -> Any:
    # Beyond |x| = 30 erfc rounds to 0 (or 2) in both types; mpmath overflows on huge x.
    return mp.erfc(x) if abs(x) < 30 else mp.mpf(0 if x > 0 else 2)


def _exact_round_half_away(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    frac = np.abs(x - t)
    return np.where(frac >= 0.5, t + np.sign(x), t).astype(x.dtype)


UNARY: dict[str, tuple[Callable[[Any, Any], Any], Callable[[np.ndarray], np.ndarray], str]] = {
    # method: (mpmath reference, NumPy C99 special values, domain)
    "exp": (lambda mp, x: mp.exp(x), np.exp, "exp"),
    "exp2": (lambda mp, x: mp.power(2, x), np.exp2, "exp2"),
    "exp10": (lambda mp, x: mp.power(10, x), lambda x: np.power(x.dtype.type(10), x), "exp10"),
    "exp_m1": (lambda mp, x: mp.expm1(x), np.expm1, "exp"),
    "ln": (lambda mp, x: mp.log(x), np.log, "positive"),
    "log2": (lambda mp, x: mp.log(x, 2), np.log2, "positive"),
    "log10": (lambda mp, x: mp.log10(x), np.log10, "positive"),
    "ln_1p": (lambda mp, x: mp.log1p(x), np.log1p, "log1p"),
    "sin": (lambda mp, x: mp.sin(x), np.sin, "trig"),
    "cos": (lambda mp, x: mp.cos(x), np.cos, "trig"),
    "tan": (lambda mp, x: mp.tan(x), np.tan, "trig"),
    "asin": (lambda mp, x: mp.asin(x), np.arcsin, "unit"),
    "acos": (lambda mp, x: mp.acos(x), np.arccos, "unit"),
    "atan": (lambda mp, x: mp.atan(x), np.arctan, "wide"),
    "sinh": (lambda mp, x: mp.sinh(x), np.sinh, "exp"),
    "cosh": (lambda mp, x: mp.cosh(x), np.cosh, "exp"),
    "tanh": (lambda mp, x: mp.tanh(x), np.tanh, "wide"),
    "asinh": (lambda mp, x: mp.asinh(x), np.arcsinh, "wide"),
    "acosh": (lambda mp, x: mp.acosh(x), np.arccosh, "above_one"),
    "atanh": (lambda mp, x: mp.atanh(x), np.arctanh, "unit"),
    "sqrt": (lambda mp, x: mp.sqrt(x), np.sqrt, "positive"),
    "rsqrt": (lambda mp, x: 1 / mp.sqrt(x), lambda x: (1 / np.sqrt(x)).astype(x.dtype), "positive"),
    "cbrt": (_cbrt, np.cbrt, "wide"),
    "erf": (lambda mp, x: mp.erf(x), np.vectorize(math.erf, otypes=[float]), "wide"),
    "erfc": (_erfc, np.vectorize(math.erfc, otypes=[float]), "erfc"),
    "floor": (lambda mp, x: mp.floor(x), np.floor, "halves"),
    "ceil": (lambda mp, x: mp.ceil(x), np.ceil, "halves"),
    "round": (
        lambda mp, x: mp.sign(x) * mp.floor(abs(x) + mp.mpf(1) / 2),
        _exact_round_half_away,
        "halves",
    ),
    "round_ties_even": (lambda mp, x: mp.nint(x), np.rint, "halves"),
    "trunc": (lambda mp, x: mp.sign(x) * mp.floor(abs(x)), np.trunc, "halves"),
    "abs": (lambda mp, x: abs(x), np.abs, "wide"),
}

BINARY: dict[
    str, tuple[Callable[[Any, Any, Any], Any], Callable[[np.ndarray, np.ndarray], np.ndarray], str]
] = {
    "powf": (lambda mp, x, y: mp.power(x, y), np.power, "pow"),
    "atan2": (lambda mp, x, y: mp.atan2(x, y), np.arctan2, "pair"),
    "hypot": (lambda mp, x, y: mp.hypot(x, y), np.hypot, "pair"),
    "min": (lambda mp, x, y: min(x, y), np.fmin, "pair"),
    "max": (lambda mp, x, y: max(x, y), np.fmax, "pair"),
    "copysign": (
        lambda mp, x, y: (
            mp.fabs(x) * (1 if y > 0 or (y == 0 and math.copysign(1, float(y)) > 0) else -1)
        ),
        np.copysign,
        "pair",
    ),
    "powi": (
        lambda mp, x, n: mp.power(x, int(n)),
        lambda x, n: np.power(x, n.astype(x.dtype)),
        "powi",
    ),
}


def _edges(dtype: Any) -> np.ndarray:
    fi = np.finfo(dtype)
    tiny = float(fi.smallest_subnormal)
    vals = [
        0.0,
        -0.0,
        tiny,
        -tiny,
        float(fi.tiny),
        -float(fi.tiny),
        float(fi.max),
        -float(fi.max),
        math.inf,
        -math.inf,
        math.nan,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        1e30,
        -1e30,
        1e22,
        3.0e38,
    ]
    if dtype == np.float64:
        vals += [1e300, -1e300, 2.0**1000]
    return np.array(vals, dtype=dtype)


def _domain(kind: str, dtype: Any, rng: np.random.Generator, n: int) -> np.ndarray:
    """Random inputs for ``kind``: log-uniform magnitudes, both signs."""
    f64 = dtype == np.float64
    maxe = 1023 if f64 else 127
    mine = -1074 if f64 else -149

    def logu(lo: float, hi: float, k: int) -> np.ndarray:
        return np.exp2(rng.uniform(lo, hi, k))

    sign = rng.choice([-1.0, 1.0], n)
    if kind == "exp":
        lim = 709.7 if f64 else 88.7
        x = sign * np.concatenate(
            [logu(-30, math.log2(lim), n // 2), rng.uniform(0, lim * 1.03, n - n // 2)]
        )
    elif kind == "exp2":
        lim = 1075 if f64 else 150
        x = sign * np.concatenate(
            [logu(-30, math.log2(lim), n // 2), rng.uniform(0, lim, n - n // 2)]
        )
    elif kind == "exp10":
        lim = 308.3 if f64 else 38.5
        x = sign * np.concatenate(
            [logu(-30, math.log2(lim), n // 2), rng.uniform(0, lim, n - n // 2)]
        )
    elif kind == "positive":
        x = logu(mine, maxe + 0.99, n)
        x[: n // 20] *= -1  # a few negatives: NaN
    elif kind == "log1p":
        x = np.concatenate([-logu(-60, -1e-9, n // 3), logu(-60, maxe, n - n // 3)])
    elif kind == "trig":
        x = sign * np.concatenate([logu(-30, 17, n // 2), logu(17, maxe + 0.99, n - n // 2)])
    elif kind == "unit":
        x = sign * logu(-40, 0, n)
    elif kind == "above_one":
        x = 1 + logu(-40, maxe - 0.5, n)
    elif kind == "erfc":  # beyond |x| = 2^5 erfc is 0 or 2 in both types
        x = sign * logu(-40, 5, n)
    elif kind == "halves":
        x = sign * np.concatenate(
            [rng.integers(0, 1 << 20, n // 2) / 2, logu(-10, maxe, n - n // 2)]
        )
    else:  # wide
        x = sign * logu(-40 if not f64 else -300, maxe + 0.99, n)
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def _pairs(
    kind: str, dtype: Any, rng: np.random.Generator, n: int
) -> tuple[np.ndarray, np.ndarray]:
    f64 = dtype == np.float64
    maxe = 1023 if f64 else 127
    if kind == "pow":
        x = np.exp2(rng.uniform(-20, 20, n))
        y = rng.uniform(-30, 30, n)
        neg = np.arange(n) < n // 10
        x[neg] = -x[neg]
        y[neg] = np.round(y[neg])  # negative bases with integer exponents: real results
        return x.astype(dtype), y.astype(dtype)
    if kind == "powi":
        x = rng.choice([-1, 1], n) * np.exp2(rng.uniform(-8, 8, n))
        return x.astype(dtype), rng.integers(-8, 9, n).astype(np.int32)
    s = rng.choice([-1.0, 1.0], (2, n))
    m = np.exp2(rng.uniform(-40, maxe, (2, n)))
    with np.errstate(over="ignore"):
        return (s[0] * m[0]).astype(dtype), (s[1] * m[1]).astype(dtype)


# ---------------------------------------------------------------------------------------
# Launch and compare


def _run(mod: Any, name: str, *inputs: np.ndarray, outputs: int = 1) -> list[np.ndarray]:
    dev = [ferrocuda.DeviceArray.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    outs = [
        ferrocuda.DeviceArray.from_numpy(np.full(inputs[0].shape, np.nan, dtype=inputs[0].dtype))
        for _ in range(outputs)
    ]
    getattr(mod, name)(*dev, *outs)
    return [o.to_numpy() for o in outs]


def _edge(v: Any) -> bool:
    """An input whose result C99 Annex F specifies exactly: ±0, ±inf, NaN."""
    if isinstance(v, np.integer):
        return False
    f = float(v)
    return not math.isfinite(f) or f == 0


def _check(
    mp: Any,
    method: str,
    dtype: Any,
    args: list[np.ndarray],
    got: np.ndarray,
    ref: Callable[..., Any],
    c99: Callable[..., np.ndarray],
    bound: int,
) -> float:
    """Max ulp error of ``got``; asserts the bound and the C99 special values.

    Inputs that are ±0, ±inf or NaN take NumPy's (C99) result as the reference, sign of zero
    included; all others mpmath's, correctly rounded to ``dtype``. A NaN must be a NaN; an
    infinite or zero C99 result must be matched exactly; every other result is measured in
    ulps (an overflow to inf against the largest finite value counts one ulp more).
    """
    with np.errstate(all="ignore"):
        special = np.asarray(c99(*args), dtype=np.float64)
    worst, worst_at = 0.0, None
    real = _real(mp, lambda *a: ref(mp, *a))
    for i in range(got.shape[0]):
        xs = [a[i] for a in args]
        edge = any(_edge(v) for v in xs)
        if edge:
            want = float(np.asarray(special[i]).astype(dtype))
        else:
            r = real(*[int(v) if isinstance(v, np.integer) else mp.mpf(float(v)) for v in xs])
            want = math.nan if r is None else _round_to(mp, mp.mpf(r), dtype)
        g = float(got[i])
        where = f"{method} {np.dtype(dtype).name}{tuple(xs)}: got {g!r}, want {want!r}"
        if math.isnan(want) or math.isnan(g):
            assert math.isnan(want) and math.isnan(g), where
            continue
        if edge and (want == 0 or math.isinf(want)):
            # min/max of +0 and -0 (equal values): Rust lets either be returned.
            either = method in ("min", "max") and all(float(v) == 0 for v in xs)
            assert g == want and (either or math.copysign(1, g) == math.copysign(1, want)), where
            continue
        e = _ulps(g, want, dtype)
        if e > worst:
            worst, worst_at = e, where
    assert worst <= bound, f"max error {worst} ulp > bound {bound} at {worst_at}"
    return worst


def _record(method: str, dtype: Any, bound: Any, worst: float, n: int) -> None:
    RESULTS[f"{method}_{np.dtype(dtype).name}"] = {
        "bound_ulp": bound,
        "max_ulp": worst,
        "samples": n,
    }


DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("method", sorted(UNARY))
def test_unary_accuracy(
    mod: Any,
    mp: Any,
    bounds: dict[str, tuple[int, int]],
    rng: np.random.Generator,
    method: str,
    dtype: Any,
) -> None:
    ref, c99, kind = UNARY[method]
    x = np.concatenate([_domain(kind, dtype, rng, N_RANDOM), _edges(dtype)])
    (got,) = _run(mod, f"math_{method}_{'f32' if dtype == np.float32 else 'f64'}", x)
    bound = bounds[method][0 if dtype == np.float32 else 1]
    _record(method, dtype, bound, _check(mp, method, dtype, [x], got, ref, c99, bound), len(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("method", sorted(BINARY))
def test_binary_accuracy(
    mod: Any,
    mp: Any,
    bounds: dict[str, tuple[int, int]],
    rng: np.random.Generator,
    method: str,
    dtype: Any,
) -> None:
    ref, c99, kind = BINARY[method]
    x, y = _pairs(kind, dtype, rng, N_RANDOM)
    if kind != "powi":
        e = _edges(dtype)
        ex, ey = np.meshgrid(e[:12], e[:12])
        x, y = np.concatenate([x, ex.ravel()]), np.concatenate([y, ey.ravel()])
    (got,) = _run(mod, f"math_{method}_{'f32' if dtype == np.float32 else 'f64'}", x, y)
    bound = bounds[method][0 if dtype == np.float32 else 1]
    _record(method, dtype, bound, _check(mp, method, dtype, [x, y], got, ref, c99, bound), len(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_sin_cos_and_mul_add(
    mod: Any, mp: Any, bounds: dict[str, tuple[int, int]], rng: np.random.Generator, dtype: Any
) -> None:
    t = "f32" if dtype == np.float32 else "f64"
    k = 0 if dtype == np.float32 else 1
    x = np.concatenate([_domain("trig", dtype, rng, N_RANDOM), _edges(dtype)])
    s, c = _run(mod, f"math_sin_cos_{t}", x, outputs=2)
    b = bounds["sin_cos"][k]
    ws = _check(mp, "sin", dtype, [x], s, UNARY["sin"][0], np.sin, b)
    wc = _check(mp, "cos", dtype, [x], c, UNARY["cos"][0], np.cos, b)
    _record("sin_cos", dtype, b, max(ws, wc), len(x))
    # mul_add: one rounding of the exact x·a + b.
    x, a, bb = (
        rng.uniform(-1, 1, (3, N_RANDOM)) * np.exp2(rng.uniform(-20, 20, (3, N_RANDOM)))
    ).astype(dtype)
    (got,) = _run(mod, f"math_mul_add_{t}", x, a, bb)
    with np.errstate(all="ignore"):
        w = _check(
            mp,
            "mul_add",
            dtype,
            [x, a, bb],
            got,
            lambda mp, p, q, r: p * q + r,
            lambda p, q, r: p * q + r,
            0,
        )
    _record("mul_add", dtype, 0, w, len(x))


FAST: dict[str, tuple[str, Callable[[Any, Any], Any], tuple[float, float], str]] = {
    # method: (bound kind, reference, domain, bound) — the CUDA Programming Guide's
    # "Intrinsic Functions" bounds on the domains it states them for.
    "sin": ("abs", lambda mp, x: mp.sin(x), (-math.pi, math.pi), "2^-21.41"),
    "cos": ("abs", lambda mp, x: mp.cos(x), (-math.pi, math.pi), "2^-21.19"),
    "ln": ("abs", lambda mp, x: mp.log(x), (0.5, 2.0), "2^-21.41"),
    "log2": ("abs", lambda mp, x: mp.log(x, 2), (0.5, 2.0), "2^-22"),
    "exp": ("ulp_exp", lambda mp, x: mp.exp(x), (-10.0, 10.0), "2 + floor(1.173|x|)"),
    # ferrocuda's own (device/src/math.rs's table): 5.5e-7 for the arithmetic, 4.5e-7 for
    # `rcp`/`ex2.approx`; and `rcp.approx.ftz`'s 1 ulp (PTX ISA) away from subnormals.
    "erfc": ("abs", lambda mp, x: mp.erfc(x), (-10.0, 10.0), "2^-19.5"),
    # Φ(−|x|) = erfc(|x|/√2)/2: half erfc_fast's bounds on the same polynomial (2.8e-7 for
    # the arithmetic, 2.25e-7 for `rcp`/`ex2.approx`), over the GELU's range.
    "normal_tail": (
        "abs",
        lambda mp, x: mp.erfc(abs(x) / mp.sqrt(2)) / 2,
        (-14.0, 14.0),
        "2^-20.5",
    ),
    "recip": ("ulp", lambda mp, x: 1 / x, (2.0**-120, 2.0**120), "1"),
}


@pytest.mark.parametrize("method", sorted(FAST))
def test_fast_forms_within_their_documented_error(
    mod: Any, mp: Any, rng: np.random.Generator, method: str
) -> None:
    kind, ref, (lo, hi), text = FAST[method]
    if kind == "ulp":
        # Magnitudes spread over the domain's binades, both signs.
        x = (
            rng.choice([-1.0, 1.0], N_RANDOM)
            * np.exp2(rng.uniform(np.log2(lo), np.log2(hi), N_RANDOM))
        ).astype(np.float32)
    else:
        x = rng.uniform(lo, hi, N_RANDOM).astype(np.float32)
    (got,) = _run(mod, f"fast_{method}_f32", x)
    worst = 0.0
    for xi, g in zip(x, got, strict=True):
        r = ref(mp, mp.mpf(float(xi)))
        if kind == "abs":
            err = abs(float(g) - float(r))
            limit = 2.0 ** float(text[2:])  # "2^-21.41"
        elif kind == "ulp":
            err = _ulps(float(g), _round_to(mp, r, np.float32), np.float32)
            limit = float(text)
        else:
            err = _ulps(float(g), _round_to(mp, r, np.float32), np.float32)
            limit = 2 + math.floor(1.173 * abs(float(xi)))
        worst = max(worst, err / limit)
        assert err <= limit, f"{method}_fast({xi!r}) = {g!r}: error {err} > {text}"
    RESULTS[f"{method}_fast_f32"] = {
        "bound": text,
        "max_error_over_bound": worst,
        "samples": len(x),
    }
    # div_fast: 2 ulp for |y| in [2^-126, 2^126] (and normal quotients).
    if method == "exp":
        a = (rng.uniform(-1, 1, N_RANDOM) * np.exp2(rng.uniform(-60, 60, N_RANDOM))).astype(
            np.float32
        )
        b = (rng.choice([-1, 1], N_RANDOM) * np.exp2(rng.uniform(-60, 60, N_RANDOM))).astype(
            np.float32
        )
        (q,) = _run(mod, "fast_div_f32", a, b)
        worst_div = max(
            _ulps(
                float(qi),
                _round_to(mp, mp.mpf(float(ai)) / mp.mpf(float(bi)), np.float32),
                np.float32,
            )
            for ai, bi, qi in zip(a, b, q, strict=True)
        )
        RESULTS["div_fast_f32"] = {"bound_ulp": 2, "max_ulp": worst_div, "samples": len(a)}
        assert worst_div <= 2


def test_zz_report() -> None:
    """Writes and prints the measured maximum errors (after the tests above)."""
    if not RESULTS:
        pytest.skip("no accuracy test ran")
    out = Path(os.environ.get("OUT", "/tmp")) / "device_math_accuracy.json"
    out.write_text(json.dumps(RESULTS, indent=1, sort_keys=True))
    lines = [
        f"{k:28} bound {v.get('bound_ulp', v.get('bound'))!s:>20}  "
        f"measured {v.get('max_ulp', v.get('max_error_over_bound'))}"
        for k, v in sorted(RESULTS.items())
    ]
    print("\n".join(lines))
    print(f"written to {out}")
