//! What every atomic operation names: its memory [`Order`], its [`Scope`], and the state
//! space (`Space`) its address is used in (the thread model is in the [parent module](super)).

/// Memory order of an atomic operation (PTX `.sem`): what it orders besides its own location.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Order {
    /// `.relaxed`: atomic on its location, orders nothing else.
    Relaxed,
    /// `.acquire`: later memory operations of this thread stay after it.
    Acquire,
    /// `.release`: earlier memory operations of this thread stay before it.
    Release,
    /// `.acq_rel`: both (for read-modify-write operations).
    AcqRel,
}

/// The set of threads an atomic operation or fence is atomic/ordered with (PTX `.scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `.cta`: the threads of this block (CUDA `thread_scope_block`).
    Block,
    /// `.gpu`: every thread on this GPU (CUDA `thread_scope_device`).
    Device,
    /// `.sys`: also the host and other GPUs (CUDA `thread_scope_system`).
    System,
    /// `.cluster`: the threads of this block's thread-block cluster (CUDA
    /// `thread_scope_cluster`; sm_90 and newer — a kernel built for `arch = "sm_90"`): the
    /// scope of atomics on a peer block's shared memory ([`cluster`](crate::cluster)).
    Cluster,
}

/// The PTX state space an address is used in.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// A generic address (no state-space qualifier).
    Generic,
    /// `.global`, after `cvta.to.global`.
    Global,
    /// `.shared`, after `cvta.to.shared`.
    Shared,
    /// `.shared::cluster`: the address is already in the cluster's shared window (made by
    /// `mapa.shared::cluster`; see [`cluster`](crate::cluster)).
    SharedCluster,
}

impl Order {
    /// The order of the load that starts a CAS loop: acquire if this order acquires.
    #[inline(always)]
    pub(super) fn load_part(self) -> Order {
        match self {
            Order::Acquire | Order::AcqRel => Order::Acquire,
            Order::Relaxed | Order::Release => Order::Relaxed,
        }
    }

    /// Whether PTX's `red`/`st` admit this order.
    // Its callers are the device's `red_*` bodies (`#[gpu_only]`).
    #[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
    #[inline(always)]
    pub(super) fn is_release_side(self) -> bool {
        matches!(self, Order::Relaxed | Order::Release)
    }
}

#[cfg(test)]
mod tests {
    use super::Order::{self, *};

    const ALL: [Order; 4] = [Relaxed, Acquire, Release, AcqRel];

    #[test]
    fn the_load_of_a_cas_loop_acquires_when_the_order_does() {
        let loads = ALL.map(Order::load_part);
        assert_eq!(loads, [Relaxed, Acquire, Relaxed, Acquire]);
    }

    #[test]
    fn red_and_st_admit_relaxed_and_release_only() {
        let admitted = ALL.map(Order::is_release_side);
        assert_eq!(admitted, [true, false, true, false]);
    }
}
