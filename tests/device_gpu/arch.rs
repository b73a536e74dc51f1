//! Kernels built for several architectures (`#[kernel(arch = "…")]`): the module loads the
//! parts the device runs, a family launch runs the kernel of the highest architecture the
//! device runs, and a kernel whose code the device cannot run is refused, naming it.

use crate::{down, ensure, err, module, up, TestResult, DEV};
use ferrocuda::host::driver::Context;
use ferrocuda::{Arg, ErrorKind, LaunchOptions};

pub const TESTS: &[crate::Test] = &[("arch_parts_and_family_choice", test_arch_parts)];

/// What each `arch_probe` kernel writes: the architecture its code was built for.
const WRITES: [(&str, u32); 3] = [
    ("arch_probe_base", 80),
    ("arch_probe_sm90", 90),
    ("arch_probe_sm90a", 900),
];

fn test_arch_parts() -> TestResult {
    let m = module()?;
    let cc = Context::get(DEV).map_err(err)?.compute_capability();
    let loaded = m.loaded_image(DEV).map_err(err)?;
    eprintln!("device {DEV}: compute capability {cc:?}; loaded {loaded}");
    let n = 4099;
    for (name, value) in WRITES {
        let k = m.kernel(name).map_err(err)?;
        let out = up(&vec![0xDEAD_BEEFu32; n])?;
        let args = [Arg::Array(out.desc())];
        // SAFETY: the kernel writes only the elements of its own thread, within the array.
        let launched = unsafe { k.launch(&args, &LaunchOptions::default()) };
        if k.runs_on(cc) {
            launched.map_err(|e| err(format!("{name}: {e}")))?;
            let got = down(&out)?;
            ensure(got.iter().all(|&v| v == value), || {
                format!("{name}: wrote {:?}…, not {value}", &got[..4])
            })?;
        } else {
            let e = match launched {
                Ok(_) => return Err(err(format!("{name} launched on {cc:?}"))),
                Err(e) => e,
            };
            ensure(
                e.kind() == ErrorKind::Unsupported && e.to_string().contains(name),
                || format!("{name}: refused with {e}"),
            )?;
            // Nothing written.
            ensure(down(&out)?.iter().all(|&v| v == 0xDEAD_BEEF), || {
                format!("{name}: refused, yet wrote")
            })?;
        }
    }
    // The family runs the kernel of the highest architecture the device runs.
    let out = up(&vec![0u32; n])?;
    let args = [Arg::Array(out.desc())];
    let chosen = m.select("arch_probe", &args).map_err(err)?;
    let expect = match cc {
        (9, 0) => "arch_probe_sm90a",
        (major, _) if major >= 9 => "arch_probe_sm90",
        _ => "arch_probe_base",
    };
    ensure(chosen.name() == expect, || {
        format!("family chose {} on {cc:?}, not {expect}", chosen.name())
    })?;
    // SAFETY: as above.
    unsafe { chosen.launch(&args, &LaunchOptions::default()) }.map_err(err)?;
    let value = WRITES.iter().find(|(k, _)| *k == expect).unwrap().1;
    ensure(down(&out)?.iter().all(|&v| v == value), || {
        format!("family launch did not write {value}")
    })?;
    // The parts the device runs were loaded from their cubins.
    if cc == (9, 0) {
        for part in ["sm_90 part: sm_90 cubin", "sm_90a part: sm_90a cubin"] {
            ensure(loaded.contains(part), || {
                format!("{part} not in `{loaded}`")
            })?;
        }
    }
    Ok(())
}
