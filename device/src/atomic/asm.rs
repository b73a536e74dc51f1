//! The PTX text of every atomic instruction, generated from the order, scope and memory space.
//!
//! PTX spells the memory order, the scope and the state space into the instruction
//! (`atom.acq_rel.gpu.global.add.u32`), and `asm!` templates must be literals: `dispatch!`
//! matches on the three runtime values and expands its callback once per combination with the
//! corresponding literals. The public functions are `#[inline(always)]` and are called with
//! constants, so after inlining one instruction remains.

/// Expands `$cb!(sem, scope, space, cvta; args…)` for `$o`, `$sc`, `$sp`.
///
/// `all` admits every [`Order`](super::Order); `acquire_side` only relaxed and acquire (loads),
/// `release_side` only relaxed and release (stores, `red`); a disallowed order aborts the
/// kernel, as `core::sync::atomic` panics for it.
macro_rules! dispatch {
    (all $o:expr, $sc:expr, $sp:expr => $cb:ident!($($a:tt)*)) => {
        match $o {
            $crate::atomic::Order::Relaxed => dispatch!(@scope ".relaxed", $sc, $sp => $cb!($($a)*)),
            $crate::atomic::Order::Acquire => dispatch!(@scope ".acquire", $sc, $sp => $cb!($($a)*)),
            $crate::atomic::Order::Release => dispatch!(@scope ".release", $sc, $sp => $cb!($($a)*)),
            $crate::atomic::Order::AcqRel => dispatch!(@scope ".acq_rel", $sc, $sp => $cb!($($a)*)),
        }
    };
    (acquire_side $o:expr, $sc:expr, $sp:expr => $cb:ident!($($a:tt)*)) => {
        match $o {
            $crate::atomic::Order::Relaxed => dispatch!(@scope ".relaxed", $sc, $sp => $cb!($($a)*)),
            $crate::atomic::Order::Acquire => dispatch!(@scope ".acquire", $sc, $sp => $cb!($($a)*)),
            _ => $crate::atomic::invalid_order(),
        }
    };
    (release_side $o:expr, $sc:expr, $sp:expr => $cb:ident!($($a:tt)*)) => {
        match $o {
            $crate::atomic::Order::Relaxed => dispatch!(@scope ".relaxed", $sc, $sp => $cb!($($a)*)),
            $crate::atomic::Order::Release => dispatch!(@scope ".release", $sc, $sp => $cb!($($a)*)),
            _ => $crate::atomic::invalid_order(),
        }
    };
    (@scope $sem:literal, $sc:expr, $sp:expr => $cb:ident!($($a:tt)*)) => {
        match $sc {
            $crate::atomic::Scope::Block => dispatch!(@space $sem, ".cta", $sp => $cb!($($a)*)),
            $crate::atomic::Scope::Device => dispatch!(@space $sem, ".gpu", $sp => $cb!($($a)*)),
            $crate::atomic::Scope::System => dispatch!(@space $sem, ".sys", $sp => $cb!($($a)*)),
            $crate::atomic::Scope::Cluster => dispatch!(@space $sem, ".cluster", $sp => $cb!($($a)*)),
        }
    };
    (@space $sem:literal, $scl:literal, $sp:expr => $cb:ident!($($a:tt)*)) => {
        match $sp {
            $crate::atomic::Space::Generic => $cb!($sem, $scl, "", ""; $($a)*),
            $crate::atomic::Space::Global => {
                $cb!($sem, $scl, ".global", "cvta.to.global.u64 {p}, {p}; "; $($a)*)
            }
            $crate::atomic::Space::Shared => {
                $cb!($sem, $scl, ".shared", "cvta.to.shared.u64 {p}, {p}; "; $($a)*)
            }
            $crate::atomic::Space::SharedCluster => {
                $cb!($sem, $scl, ".shared::cluster", ""; $($a)*)
            }
        }
    };
}

/// `atom<sem><scope><space><op><ty> r, [p], v;` → `r`.
macro_rules! atom_asm {
    ($sem:literal, $sc:literal, $sp:literal, $cvta:literal; $op:literal, $ty:literal, $reg:ident, $p:expr, $v:expr) => {{
        let r;
        // SAFETY: the caller of the enclosing unsafe fn guarantees that `p` is valid and
        // aligned for the access in the named state space.
        unsafe {
            core::arch::asm!(
                concat!($cvta, "atom", $sem, $sc, $sp, $op, $ty, " {r}, [{p}], {v};"),
                p = inout(reg64) $p => _, v = in($reg) $v, r = out($reg) r,
                options(nostack),
            )
        };
        r
    }};
}

/// `atom<sem><scope><space>.cas<ty> r, [p], c, n;` → `r`.
macro_rules! cas_asm {
    ($sem:literal, $sc:literal, $sp:literal, $cvta:literal; $ty:literal, $reg:ident, $p:expr, $c:expr, $n:expr) => {{
        let r;
        // SAFETY: as in `atom_asm!`.
        unsafe {
            core::arch::asm!(
                concat!($cvta, "atom", $sem, $sc, $sp, ".cas", $ty, " {r}, [{p}], {c}, {n};"),
                p = inout(reg64) $p => _, c = in($reg) $c, n = in($reg) $n, r = out($reg) r,
                options(nostack),
            )
        };
        r
    }};
}

/// `red<sem><scope><space><op><ty> [p], v;` (no result).
macro_rules! red_asm {
    ($sem:literal, $sc:literal, $sp:literal, $cvta:literal; $op:literal, $ty:literal, $reg:ident, $p:expr, $v:expr) => {
        // SAFETY: as in `atom_asm!`.
        unsafe {
            core::arch::asm!(
                concat!($cvta, "red", $sem, $sc, $sp, $op, $ty, " [{p}], {v};"),
                p = inout(reg64) $p => _, v = in($reg) $v,
                options(nostack),
            )
        }
    };
}

/// `ld<sem><scope><space><ty> r, [p];` → `r`.
macro_rules! ld_asm {
    ($sem:literal, $sc:literal, $sp:literal, $cvta:literal; $ty:literal, $reg:ident, $p:expr) => {{
        let r;
        // SAFETY: as in `atom_asm!`.
        unsafe {
            core::arch::asm!(
                concat!($cvta, "ld", $sem, $sc, $sp, $ty, " {r}, [{p}];"),
                p = inout(reg64) $p => _, r = out($reg) r,
                options(nostack),
            )
        };
        r
    }};
}

/// `st<sem><scope><space><ty> [p], v;`.
macro_rules! st_asm {
    ($sem:literal, $sc:literal, $sp:literal, $cvta:literal; $ty:literal, $reg:ident, $p:expr, $v:expr) => {
        // SAFETY: as in `atom_asm!`.
        unsafe {
            core::arch::asm!(
                concat!($cvta, "st", $sem, $sc, $sp, $ty, " [{p}], {v};"),
                p = inout(reg64) $p => _, v = in($reg) $v,
                options(nostack),
            )
        }
    };
}
