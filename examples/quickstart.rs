//! Quickstart: run the bundled kernels on device arrays and check the results on the host.
//!
//! `cargo run --release --example quickstart` — on a machine without a CUDA driver it says
//! so and exits successfully after showing what was built.

use ferrocuda::{bundled, kernels, DeviceArray, LaunchOptions, StreamRef};
use ndarray::{Array1, Array3};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let module = bundled::module()?;
    println!(
        "ferrocuda: {} kernels in the bundled PTX (target {}):",
        module.signatures().len(),
        module.manifest().arch
    );
    for s in module.signatures() {
        println!(
            "  {:<20} family {:<17} ({})",
            s.name,
            s.family,
            s.param_list()
        );
    }
    if let Err(e) = ferrocuda::host::driver::device_count().and_then(|n| {
        if n == 0 {
            Err(ferrocuda::Error::new(
                ferrocuda::ErrorKind::NoDriver,
                "no CUDA device",
            ))
        } else {
            Ok(n)
        }
    }) {
        println!("\nNo GPU to run on: {e}\nThe PTX was built; run this example on a machine with an NVIDIA GPU.");
        return Ok(());
    }

    let s = StreamRef::Legacy;
    let opts = LaunchOptions::default();

    // out = a + b
    let n = 1_000_003;
    let a = Array1::from_iter((0..n).map(|i| i as f32));
    let b = Array1::from_iter((0..n).map(|i| 0.5 * i as f32));
    let (da, db) = (
        DeviceArray::from_ndarray(&a, 0, s)?,
        DeviceArray::from_ndarray(&b, 0, s)?,
    );
    let out = DeviceArray::<f32>::empty(&[n], 0, s)?;
    kernels::add_f32(&da, &db, &out, &opts)?;
    let got = out.to_ndarray()?;
    let ok = got
        .iter()
        .zip(a.iter().zip(&b))
        .all(|(g, (x, y))| *g == x + y);
    println!(
        "\nadd_f32 on {n} elements: {}",
        if ok { "matches the host" } else { "MISMATCH" }
    );

    // x[i] = i
    let x = DeviceArray::<i32>::empty(&[1000], 0, s)?;
    kernels::initialize_array(&x, &opts)?;
    let got = x.to_ndarray()?;
    let ok2 = got.iter().enumerate().all(|(i, &v)| v == i as i32);
    println!(
        "initialize_array on 1000 elements: {}",
        if ok2 { "x[i] == i" } else { "MISMATCH" }
    );

    // x[i, j, k] += i + j + k
    let h = Array3::<f64>::from_elem((4, 5, 6), 1.0);
    let d = DeviceArray::from_ndarray(&h, 0, s)?;
    kernels::add_index_f64_3d(&d, &opts)?;
    let got = d.to_ndarray()?;
    let ok3 = got
        .indexed_iter()
        .all(|(ix, &v)| v == 1.0 + (ix[0] + ix[1] + ix[2]) as f64);
    println!(
        "add_index_f64_3d on a 4x5x6 array: {}",
        if ok3 { "matches the host" } else { "MISMATCH" }
    );
    if ok && ok2 && ok3 {
        Ok(())
    } else {
        Err("a kernel produced a wrong result".into())
    }
}
