//! The failure helpers of the GPU test binaries (`tests/gpu.rs`, `tests/gallery_gpu.rs`,
//! `tests/device_gpu/main.rs`), whose tests are `libtest_mimic` trials returning
//! [`TestResult`].

use libtest_mimic::Failed;

/// A test's outcome.
pub type TestResult = Result<(), Failed>;

/// Any displayable error as a test failure.
pub fn err(e: impl std::fmt::Display) -> Failed {
    Failed::from(e.to_string())
}

/// Fails with `msg()` unless `cond` holds.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> TestResult {
    if cond {
        Ok(())
    } else {
        Err(Failed::from(msg()))
    }
}
