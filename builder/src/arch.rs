//! The target and the architecture names every part of the builder shares: the NVPTX target
//! triple, the default cubin architectures, and the number of an `sm_XY` name.

/// The NVPTX target triple.
pub const TARGET: &str = "nvptx64-nvidia-cuda";

/// The architectures cubins are made for by default (those not older than the crate's arch,
/// and the crate's arch itself).
pub const DEFAULT_CUBIN_ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// The number of `sm_XY` (`80`), `None` for anything else.
pub(crate) fn arch_number(arch: &str) -> Option<u32> {
    arch.strip_prefix("sm_")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse().ok())
}
