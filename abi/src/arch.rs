//! GPU architectures: what a kernel is built for (`#[kernel(arch = "sm_90a")]`) and which
//! devices can run it — the one rule the builder, the manifest and every launcher use.
//!
//! An architecture is written as PTX writes its `.target`: `sm_XY` with an optional suffix.
//!
//! | written | PTX and machine code run on | e.g. |
//! | --- | --- | --- |
//! | `sm_XY` | every GPU of compute capability X.Y or newer (PTX is compiled forward by the driver) | `sm_80`: A100, H100, B200 |
//! | `sm_XYa` | exactly compute capability X.Y: the *architecture-specific* features (wgmma, `setmaxnreg`, …) do not carry forward | `sm_90a`: H100/H200 only |
//! | `sm_XYf` | the *family*: major version X, minor Y or newer (PTX ISA 8.8) | `sm_100f`: 10.0 and 10.3 |
//!
//! A kernel crate is built for one *base* architecture (`PtxBuilder::arch`, `sm_80` by
//! default); a kernel that needs more declares its own (`#[kernel(arch = "sm_90a")]`) and is
//! built, with every other kernel of that architecture, into a second PTX module of the crate.
//! The manifest records each kernel's architecture, and a launch is refused — naming the kernel,
//! its architecture and the device's — on a device that [`Arch::runs_on`] says cannot run it.

use core::fmt;

/// The suffix of an architecture name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// `sm_XY`: forward compatible (PTX runs on every newer GPU).
    Portable,
    /// `sm_XYf`: the family of major version X, minor Y and newer.
    Family,
    /// `sm_XYa`: architecture-specific, exactly compute capability X.Y.
    Specific,
}

/// A GPU architecture: compute capability and [`Variant`], as in `sm_90a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arch {
    /// Major compute capability (9 for `sm_90a`).
    pub major: u32,
    /// Minor compute capability (0 for `sm_90a`).
    pub minor: u32,
    /// The suffix.
    pub variant: Variant,
}

impl Arch {
    /// The base architecture every ferrocuda kernel may assume: `sm_80`.
    pub const SM_80: Arch = Arch::new(8, 0, Variant::Portable);

    /// `sm_<major><minor>` with `variant`'s suffix.
    pub const fn new(major: u32, minor: u32, variant: Variant) -> Arch {
        Arch {
            major,
            minor,
            variant,
        }
    }

    /// Parses `sm_80`, `sm_90a`, `sm_100f`, `sm_120a` (the last digit is the minor version).
    /// `None` for anything else, `compute_90` included.
    pub const fn parse(name: &str) -> Option<Arch> {
        let b = name.as_bytes();
        if b.len() < 5 || b[0] != b's' || b[1] != b'm' || b[2] != b'_' {
            return None;
        }
        let (end, variant) = match b[b.len() - 1] {
            b'a' => (b.len() - 1, Variant::Specific),
            b'f' => (b.len() - 1, Variant::Family),
            _ => (b.len(), Variant::Portable),
        };
        // At least two digits: major (one or more) and minor (the last).
        if end < 5 || end > 3 + 4 {
            return None;
        }
        let mut major = 0u32;
        let mut i = 3;
        while i < end - 1 {
            let d = b[i];
            if !d.is_ascii_digit() {
                return None;
            }
            major = major * 10 + (d - b'0') as u32;
            i += 1;
        }
        let m = b[end - 1];
        if !m.is_ascii_digit() || major == 0 {
            return None;
        }
        Some(Arch::new(major, (m - b'0') as u32, variant))
    }

    /// Whether a device of compute capability `cc` (major, minor) runs code built for this
    /// architecture: see the [module documentation](self).
    pub const fn runs_on(&self, cc: (u32, u32)) -> bool {
        let (major, minor) = cc;
        match self.variant {
            Variant::Portable => major > self.major || (major == self.major && minor >= self.minor),
            Variant::Family => major == self.major && minor >= self.minor,
            Variant::Specific => major == self.major && minor == self.minor,
        }
    }

    /// The compute capability as one number: 90 for `sm_90a`, 100 for `sm_100f`.
    pub const fn number(&self) -> u32 {
        self.major * 10 + self.minor
    }

    /// Whether code built for `self` may call what code built for `other` may: `self` runs
    /// only where `other` does, and has at least its features. `sm_90a` includes `sm_90` and
    /// `sm_80`; `sm_90` does not include `sm_90a`.
    pub const fn includes(&self, other: &Arch) -> bool {
        match other.variant {
            Variant::Portable => self.number() >= other.number(),
            Variant::Family => {
                self.major == other.major
                    && self.minor >= other.minor
                    && !matches!(self.variant, Variant::Portable)
            }
            Variant::Specific => {
                self.major == other.major
                    && self.minor == other.minor
                    && matches!(self.variant, Variant::Specific)
            }
        }
    }

    /// The lowest PTX ISA version (`(major, minor)`) whose `.target` names this architecture:
    /// 7.0 for `sm_80`, 7.8 for `sm_90`, 8.0 for `sm_90a`, 8.6 for `sm_100a`, 8.8 for the
    /// family targets.
    pub const fn min_ptx(&self) -> (u32, u32) {
        match (self.variant, self.number()) {
            (Variant::Family, _) => (8, 8),
            (Variant::Specific, 90) => (8, 0),
            (Variant::Specific, _) => (8, 6),
            (Variant::Portable, n) if n >= 120 => (8, 7),
            (Variant::Portable, n) if n >= 100 => (8, 6),
            (Variant::Portable, n) if n >= 90 => (7, 8),
            (Variant::Portable, n) if n >= 89 => (7, 8),
            (Variant::Portable, n) if n >= 87 => (7, 4),
            (Variant::Portable, n) if n >= 86 => (7, 1),
            _ => (7, 0),
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let suffix = match self.variant {
            Variant::Portable => "",
            Variant::Family => "f",
            Variant::Specific => "a",
        };
        write!(f, "sm_{}{}{suffix}", self.major, self.minor)
    }
}

/// What a device of compute capability `cc` runs, in words, for error messages: `"compute
/// capability 8.0 (sm_80)"`.
pub struct DeviceArch(pub (u32, u32));

impl fmt::Display for DeviceArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.0;
        write!(f, "compute capability {major}.{minor} (sm_{major}{minor})")
    }
}

/// Why a kernel built for `arch` cannot run on a device of compute capability `cc`, in one
/// sentence that names what to do (the launchers' refusal).
pub fn why_not(arch: &Arch) -> &'static str {
    match arch.variant {
        Variant::Specific => {
            "architecture-specific code (an `a` target) runs only on GPUs of exactly that \
             compute capability"
        }
        Variant::Family => "family code runs only on GPUs of that major version",
        Variant::Portable => "it needs a GPU of that compute capability or newer",
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    #[test]
    fn parses_and_prints() {
        for s in [
            "sm_80", "sm_86", "sm_90", "sm_90a", "sm_100a", "sm_100f", "sm_120",
        ] {
            assert_eq!(Arch::parse(s).unwrap().to_string(), s);
        }
        for s in [
            "compute_90",
            "sm_",
            "sm_9",
            "sm_9a",
            "sm_x0",
            "sm_00",
            "sm_90b",
            "sm_12345",
        ] {
            assert_eq!(Arch::parse(s), None, "{s}");
        }
        let a = Arch::parse("sm_100a").unwrap();
        assert_eq!((a.major, a.minor, a.variant), (10, 0, Variant::Specific));
    }

    #[test]
    fn which_devices_run_what() {
        let p = |s| Arch::parse(s).unwrap();
        assert!(p("sm_80").runs_on((8, 0)) && p("sm_80").runs_on((9, 0)));
        assert!(p("sm_80").runs_on((12, 0)) && !p("sm_86").runs_on((8, 0)));
        assert!(p("sm_90a").runs_on((9, 0)));
        assert!(!p("sm_90a").runs_on((8, 9)) && !p("sm_90a").runs_on((10, 0)));
        assert!(p("sm_90").runs_on((10, 0)));
        assert!(p("sm_100f").runs_on((10, 3)) && !p("sm_100f").runs_on((12, 0)));
    }

    #[test]
    fn inclusion() {
        let p = |s| Arch::parse(s).unwrap();
        assert!(p("sm_90a").includes(&p("sm_80")) && p("sm_90a").includes(&p("sm_90")));
        assert!(!p("sm_90").includes(&p("sm_90a")) && !p("sm_80").includes(&p("sm_90")));
        assert!(!p("sm_100a").includes(&p("sm_90a")));
        assert_eq!(p("sm_90a").min_ptx(), (8, 0));
    }
}
