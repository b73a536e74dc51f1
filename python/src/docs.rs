//! Documentation text of launchers: the docstrings of kernels and families (signatures as the
//! host crate writes them, `Signature::text`).

use std::fmt::Write as _;

use ferrocuda_host::Kernel;

const CALL_DOC: &str = "\
Arrays may be any objects exporting ``__cuda_array_interface__`` (v0-v3) or
``__sycl_usm_array_interface__``, DLPack-only objects (JAX; imported with the launch stream),
``ferrocuda.DeviceArray`` / ``ForeignArray``, or NumPy host arrays (copied in, and back for
written arguments, with a ``ferrocuda.PerformanceWarning``).

Parameters may be given by keyword too, after the positional ones (``add(a, b, out=out)``):
every parameter not given by position must be named. The launch options below keep their
meaning: a kernel parameter named like one of them is passed by position.

Launch options: ``stream`` (None, 1, 2, a handle, or a CuPy/PyTorch/Numba/``__cuda_stream__``
stream object), ``sync`` (None = FERROCUDA_CUDA_ARRAY_INTERFACE_SYNC, True/'default', 'event',
False/'off'), ``grid`` and ``block`` (int or tuple of 1 to 3 ints; default: automatic),
``shared_mem`` (bytes of dynamic shared memory; default 0), ``check_pointers`` (ask the driver
whether every pointer is device memory; default True). Numba-style
``launcher[grid, block, stream, shared_mem](...)`` works too. A block, grid or shared memory
size beyond the kernel's or the device's limits is a ValueError naming the limit, raised before
anything is launched. Returns None once the launch is enqueued.";

/// The kernel's launch declarations, as sentences (empty when it declares none).
fn launch_text(k: &Kernel<'_>) -> String {
    let d = &k.signature().launch;
    let mut s = String::new();
    if let Some([x, y, z]) = d.fixed_block() {
        let _ = writeln!(
            s,
            "Launched with blocks of exactly ({x}, {y}, {z}) threads."
        );
    }
    if d.max_threads != 0 {
        let _ = writeln!(s, "Blocks of at most {} threads.", d.max_threads);
    }
    if d.min_blocks != 0 {
        let _ = writeln!(
            s,
            "Compiled for at least {} resident blocks per multiprocessor.",
            d.min_blocks
        );
    }
    if d.grid_dims >= 2 {
        let _ = writeln!(
            s,
            "Automatic grid: {}-D over the largest array, one thread per element.",
            d.grid_dims
        );
    }
    if d.grid_rows {
        let _ = writeln!(
            s,
            "Automatic grid: a worker per row of the largest array (its last axis) — {}.",
            match k.signature().items_per_thread {
                Some(k) => format!(
                    "a warp for rows of at most {} elements, a block for longer rows",
                    32 * u32::from(k)
                ),
                None => "a block per row".to_string(),
            }
        );
    }
    if d.cooperative {
        let _ = writeln!(
            s,
            "Launched cooperatively: every block of the grid is resident at once (the blocks \
             synchronize grid-wide), so the grid is at most one resident wave — the automatic \
             grid is exactly one; a larger grid is a ValueError."
        );
    }
    if let Some([x, y, z]) = d.cluster_dims() {
        let _ = writeln!(
            s,
            "Launched in thread-block clusters of ({x}, {y}, {z}) blocks (sm_90 and newer): \
             the grid must be a whole number of clusters (the automatic grid is rounded up)."
        );
    }
    if let Some(t) = ferrocuda_abi::DType::from_code(d.dynamic_shared) {
        let _ = writeln!(
            s,
            "Dynamic shared memory holds {} ({} bytes each): shared_mem must be a multiple.",
            t.name(),
            t.itemsize()
        );
    }
    s
}

/// What the launcher does beyond the arguments: zero-filled outputs, workspaces it
/// provides, requirements it checks.
fn extras_doc(sig: &ferrocuda_host::module::Signature) -> String {
    let mut s = String::new();
    for &z in &sig.zero {
        let _ = writeln!(
            s,
            "``{}`` is zero-filled right before the launch.",
            sig.params[z].name
        );
    }
    for w in &sig.scratch {
        let kept = if w.len.persist {
            ", kept between the kernel's launches on a stream"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "The launcher provides the workspace ``{}`` (a {} array{kept}; not an argument).",
            w.name,
            w.dtype.name()
        );
    }
    for r in &sig.require {
        let why = if r.message.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.message)
        };
        let _ = writeln!(s, "Requires ``{}``{why}.", r.text);
    }
    s
}

pub fn kernel_doc(k: &Kernel<'_>) -> String {
    let sig = k.signature();
    let names: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
    let mut s = format!(
        "Kernel ``{}`` (family ``{}``).\n\n    {}\n\nCall as ``{}({}, *, stream=None, sync=None, grid=None, block=None, \
         shared_mem=None, check_pointers=True)``.\n",
        sig.name,
        sig.family,
        sig.text(),
        sig.name,
        names.join(", ")
    );
    for g in &sig.same_shape {
        let g: Vec<&str> = g.iter().map(|&i| sig.params[i].name.as_str()).collect();
        let _ = writeln!(s, "Arguments {} must have the same shape.", g.join(", "));
    }
    let variants: Vec<String> = k
        .layout_variants()
        .map(|v| format!("``{}``", v.name()))
        .collect();
    if !variants.is_empty() {
        let _ = writeln!(
            s,
            "Runs this kernel or one of its layout variants ({}), whichever takes the arrays' \
             layouts: C-contiguous arrays run the contiguous kernel, others a strided one.",
            variants.join(", ")
        );
    }
    s.push_str(&extras_doc(sig));
    s.push_str(&launch_text(k));
    s.push('\n');
    s.push_str(CALL_DOC);
    s
}

pub fn family_doc(name: &str, ks: &[Kernel<'_>]) -> String {
    let names: Vec<&str> = ks[0]
        .signature()
        .params
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let mut s = format!(
        "Kernel family ``{name}``: launches the variant matching the arrays' element types, \
         ranks and layouts (its C-contiguous variant whenever every array is C-contiguous, a \
         strided one otherwise).\n\nCall as ``{name}({}, *, stream=None, sync=None, grid=None, block=None, \
         shared_mem=None, check_pointers=True)``.\n\nVariants:\n",
        names.join(", ")
    );
    for k in ks {
        let _ = writeln!(s, "    {}", k.signature().text());
    }
    let sig = ks[0].signature();
    for g in &sig.same_shape {
        let g: Vec<&str> = g.iter().map(|&i| sig.params[i].name.as_str()).collect();
        let _ = writeln!(s, "\nArguments {} must have the same shape.", g.join(", "));
    }
    let extras = extras_doc(sig);
    if !extras.is_empty() {
        s.push('\n');
        s.push_str(&extras);
    }
    s.push('\n');
    s.push_str(CALL_DOC);
    s
}
