//! Device printf and failed checks, each in a child process (a trap leaves the CUDA context
//! unusable): the child is this binary again with `FERROCUDA_DEVICE_CHILD=<scenario>`; it
//! prints what it saw — the error, and `driver::trap::last_trap` — and the parent checks the
//! output.

use crate::{down, ensure, err, launch, scalar, up, TestResult, DEV};
use ferrocuda::host::driver;
use ferrocuda::StreamRef;
use libtest_mimic::Failed;

pub const TESTS: &[crate::Test] = &[
    ("diag_printf", printf),
    ("diag_device_assert_location", || {
        failure(0, "0 => device_assert!")
    }),
    ("diag_bounds_check_location", || {
        failure(1, "1 => unsafe { out.write")
    }),
    ("diag_shared_bounds_location", || {
        failure(2, "let _ = tile.get(4 + i)")
    }),
    ("diag_shared_vector_alignment_location", || {
        failure(3, "quads.get_vector(2)")
    }),
];

/// The kernels' source, for the line numbers the device records.
const DIAG_SOURCE: &str = include_str!("../device-kernels/src/diag.rs");

const ENV: &str = "FERROCUDA_DEVICE_CHILD";

/// Runs this test binary as a child in `scenario`: (exit status, stdout + stderr).
fn child(scenario: &str) -> Result<(i32, String), Failed> {
    let exe = std::env::current_exe().map_err(err)?;
    let out = std::process::Command::new(exe)
        .env(ENV, scenario)
        .output()
        .map_err(err)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.code().unwrap_or(-1), text))
}

/// The child's side: runs `scenario`, prints what happened, returns the exit status.
pub fn run_child(scenario: &str) -> i32 {
    let result = match scenario {
        "printf" => (|| {
            let x = up(&[1.5f32])?;
            launch("printf_line", &[x.arg()], [2, 1, 1], [64, 1, 1], 0)?;
            driver::synchronize_on(DEV, StreamRef::Legacy).map_err(err)
        })(),
        mode => (|| {
            let mode: u32 = mode
                .strip_prefix("fail")
                .and_then(|m| m.parse().ok())
                .unwrap_or(0);
            let out = up(&vec![0u32; 1000])?;
            let args = [out.arg(), scalar(517u32), scalar(mode)];
            launch("fail_on_purpose", &args, [4, 1, 1], [256, 1, 1], 0)?;
            driver::synchronize_on(DEV, StreamRef::Legacy).map_err(err)?;
            let _ = down(&out)?;
            Ok(())
        })(),
    };
    match result {
        Ok(()) => {
            println!("child: no error");
            0
        }
        Err(e) => {
            println!("child: error: {}", e.message().unwrap_or("?"));
            // The same record, read as a program does that saw the fault elsewhere.
            match driver::trap::last_trap(None) {
                Some(t) => println!("child: last_trap: {t}"),
                None => println!("child: last_trap: none"),
            }
            3
        }
    }
}

fn printf() -> TestResult {
    let (code, text) = child("printf")?;
    let want = "ferrocuda printf: -7 42 -9000000000 18446744073709551615 1.500 ok 100%";
    ensure(code == 0 && text.matches(want).count() == 1, || {
        format!("exit {code}; want exactly one line {want:?} in:\n{text}")
    })
}

/// Thread 517 (block 2, thread 5) fails a check; the error names the kernels' file, the line
/// of the check, and the thread.
fn failure(mode: u32, marker: &str) -> TestResult {
    let line = DIAG_SOURCE
        .lines()
        .position(|l| l.contains(marker))
        .ok_or_else(|| err(format!("no {marker:?} in diag.rs")))?
        + 1;
    let (code, text) = child(&format!("fail{mode}"))?;
    let at = format!("src/diag.rs:{line}:");
    let trap = text
        .lines()
        .find_map(|l| l.strip_prefix("child: last_trap: "))
        .unwrap_or("");
    ensure(
        code == 3
            && text.contains(&at)
            && text.contains("block (2, 0, 0), thread (5, 0, 0)")
            && text.contains("fail_on_purpose")
            && trap.starts_with("`fail_on_purpose` at ")
            && trap.contains(&at)
            && trap.ends_with("block (2, 0, 0), thread (5, 0, 0) (device 0)"),
        || format!("exit {code}; want {at:?}, the thread and the kernel in:\n{text}"),
    )
}
