//! GPU tests of strided launches through the typed launchers (a module of `tests/gpu.rs`).
//!
//! * `layouts_typed_launchers`: `kernels::add_f32`, `kernels::saxpy_f32` and
//!   `kernels::gelu_f32` on stepped, reversed, transposed and broadcast views (the launchers
//!   run their strided layout variants), every element of each output buffer compared with a
//!   host reference — elements outside the output view must keep their poison;
//! * `layouts_refused`: a broadcast (zero-stride) output and an output partially overlapping
//!   an input are refused before the launch, the output untouched.

use super::{ensure, err, opts, rng, upload, view_of, GpuTest, TestResult};
use ferrocuda::host::array::ForeignArray;
use ferrocuda::{kernels, DeviceArray, ErrorKind};
use libtest_mimic::Failed;
use rand::rngs::StdRng;
use rand::RngExt;

pub const TESTS: [GpuTest; 2] = [
    GpuTest::new("layouts_typed_launchers", test_typed_launchers),
    GpuTest::new("layouts_refused", test_refused),
];

const POISON: f32 = -7.25e30;

/// A strided view: element offset into its base, shape, element strides.
struct Layout {
    offset: isize,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

impl Layout {
    fn new(offset: isize, shape: &[usize], strides: &[isize]) -> Layout {
        Layout {
            offset,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        }
    }

    /// The base offsets of the view's elements, in C order.
    fn offsets(&self) -> Vec<usize> {
        let n: usize = self.shape.iter().product();
        (0..n)
            .map(|mut i| {
                let mut off = self.offset;
                for d in (0..self.shape.len()).rev() {
                    off += (i % self.shape[d]) as isize * self.strides[d];
                    i /= self.shape[d];
                }
                off as usize
            })
            .collect()
    }

    fn on(&self, base: &DeviceArray<f32>, readonly: bool) -> Result<ForeignArray<()>, Failed> {
        view_of(base, self.offset, &self.shape, &self.strides, readonly)
    }
}

fn random(r: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| r.random_range(-4.0f32..4.0)).collect()
}

/// Checks every element of `out` (the whole base): `want(k)` at the `k`-th element of
/// `layout`, the poison elsewhere.
fn check_base(
    what: &str,
    out: &DeviceArray<f32>,
    layout: &Layout,
    want: impl Fn(usize) -> f32,
) -> TestResult {
    let got = out.to_ndarray().map_err(err)?;
    let got = got.as_slice().unwrap();
    let mut expected = vec![POISON; got.len()];
    for (k, off) in layout.offsets().into_iter().enumerate() {
        expected[off] = want(k);
    }
    for (i, (g, w)) in got.iter().zip(&expected).enumerate() {
        ensure(g.to_bits() == w.to_bits(), || {
            format!("{what}: base element {i}: got {g}, want {w}")
        })?;
    }
    Ok(())
}

/// `kernels::add_f32` on views `[a, b, out]` of the inputs' buffers (host copies `a`, `b`)
/// and of a poisoned output buffer of `out_len` elements, every element of which is checked.
fn check_add(
    what: &str,
    (inputs, a, b): (&(DeviceArray<f32>, DeviceArray<f32>), &[f32], &[f32]),
    [la, lb, lo]: &[Layout; 3],
    out_len: usize,
) -> TestResult {
    let dout = upload(&vec![POISON; out_len])?;
    let (va, vb) = (la.on(&inputs.0, true)?, lb.on(&inputs.1, true)?);
    kernels::add_f32(&va, &vb, &lo.on(&dout, false)?, &opts()).map_err(err)?;
    let (oa, ob) = (la.offsets(), lb.offsets());
    check_base(what, &dout, lo, |k| a[oa[k]] + b[ob[k]])
}

/// `kernels::add_f32(a[::2], b[1::2][::-1], out[::3])` (the issue's call), a transposed 2-D
/// `a` with a broadcast row `b`, `saxpy_f32` in place on a reversed `y`, and `gelu_f32` on a
/// transposed input into a stepped output.
fn test_typed_launchers() -> TestResult {
    let mut r = rng(16);
    let n = (1 << 20) + 3;
    let (a, b) = (random(&mut r, 2 * n), random(&mut r, 2 * n));
    let inputs = (upload(&a)?, upload(&b)?);
    let da = &inputs.0;
    let issue = [
        Layout::new(0, &[n], &[2]),
        Layout::new(1 + 2 * (n as isize - 1), &[n], &[-2]),
        Layout::new(0, &[n], &[3]),
    ];
    check_add(
        "add, stepped and reversed",
        (&inputs, &a, &b),
        &issue,
        3 * n,
    )?;
    // 2-D: `a` transposed (a (5, 7) base seen as (7, 5)), `b` one row broadcast to 7 rows.
    let (rows, cols) = (7usize, 5usize);
    let two_d = [
        Layout::new(0, &[rows, cols], &[1, rows as isize]),
        Layout::new(2, &[rows, cols], &[0, 1]),
        Layout::new(3, &[rows, cols], &[cols as isize, 1]),
    ];
    check_add(
        "add, transposed and broadcast",
        (&inputs, &a, &b),
        &two_d,
        rows * cols + 3,
    )?;

    // saxpy in place on a reversed y: y = 1.5·x + y.
    let y0 = random(&mut r, n + 1);
    let mut y_base = vec![POISON; n + 1];
    let ly = Layout::new(n as isize, &[n], &[-1]);
    for off in ly.offsets() {
        y_base[off] = y0[off];
    }
    let dy = upload(&y_base)?;
    let lx = Layout::new(0, &[n], &[2]);
    let ox = lx.offsets();
    let oy = ly.offsets();
    kernels::saxpy_f32(1.5, &lx.on(da, true)?, &ly.on(&dy, false)?, &opts()).map_err(err)?;
    check_base("saxpy in place, reversed", &dy, &ly, |k| {
        1.5f32 * a[ox[k]] + y0[oy[k]]
    })?;

    // gelu: its strided variant computes what its contiguous kernel does, element by element.
    let lt = Layout::new(0, &[cols, rows], &[1, cols as isize]);
    let ot = lt.offsets();
    let contiguous: Vec<f32> = ot.iter().map(|&o| a[o]).collect();
    let dc = upload(&contiguous)?;
    let dref = upload(&vec![POISON; contiguous.len()])?;
    kernels::gelu_f32(&dc, &dref, &opts()).map_err(err)?;
    let reference: Vec<f32> = dref.to_ndarray().map_err(err)?.iter().copied().collect();
    let dout = upload(&vec![POISON; 2 * cols * rows])?;
    let lo = Layout::new(1, &[cols, rows], &[2 * rows as isize, 2]);
    kernels::gelu_f32(&lt.on(da, true)?, &lo.on(&dout, false)?, &opts()).map_err(err)?;
    check_base("gelu, transposed into stepped", &dout, &lo, |k| {
        reference[k]
    })?;
    Ok(())
}

/// Refused before the launch, with the argument named; the output keeps its poison.
fn test_refused() -> TestResult {
    let n = 1000;
    let da = upload(&vec![1.0f32; n])?;
    let dout = upload(&vec![POISON; n])?;
    let a = Layout::new(0, &[n], &[1]).on(&da, true)?;
    // A broadcast output: every element at one address.
    let broadcast = Layout::new(0, &[n], &[0]).on(&dout, false)?;
    let e = kernels::add_f32(&a, &a, &broadcast, &opts()).unwrap_err();
    ensure(
        e.kind() == ErrorKind::Value
            && e.arg() == Some("out")
            && e.to_string().contains("overlapping elements"),
        || format!("broadcast output: {e}"),
    )?;
    // An output on the odd elements of the buffer whose even ones are the input (reversed):
    // the host refuses an output whose extent overlaps an input's without being its view.
    let half = n / 2;
    let input = Layout::new(0, &[half], &[2]).on(&dout, true)?;
    let output = Layout::new(n as isize - 1, &[half], &[-2]).on(&dout, false)?;
    let e = kernels::add_f32(&input, &input, &output, &opts()).unwrap_err();
    ensure(
        e.kind() == ErrorKind::Value && e.to_string().contains("overlaps argument `a`"),
        || format!("partial overlap: {e}"),
    )?;
    let got = dout.to_ndarray().map_err(err)?;
    ensure(got.iter().all(|&v| v == POISON), || {
        "a refused launch wrote to its output".into()
    })
}
