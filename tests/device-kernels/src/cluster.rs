//! Thread-block clusters and distributed shared memory (sm_90: each kernel is built into the
//! crate's sm_90 part).

#[cfg(ferrocuda_arch = "sm_90")]
use ferrocuda_device::atomic::{Order, Scope};
#[cfg(ferrocuda_arch = "sm_90")]
use ferrocuda_device::{cluster, grid, shared_array, thread};
use ferrocuda_device::{kernel, Slice, SliceMut};

/// Pairs of blocks (`cluster = (2, 1, 1)`). Block `b` (rank `r` in its cluster `c`) publishes
/// `1000·c + r` in its own shared memory and writes `100 + r` into its neighbour's (rank
/// `r ^ 1`) through distributed shared memory; after a split cluster barrier
/// (arrive, then wait) it writes `out[4b ..]` = `r`, the cluster's size, the neighbour's
/// published value (read through distributed shared memory) and what the neighbour wrote into
/// its own shared memory (read locally). Expected: `(r, 2, 1000·c + (r ^ 1), 100 + (r ^ 1))`.
#[kernel(arch = "sm_90", cluster = (2, 1, 1))]
pub unsafe fn cluster_neighbour(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let slots = shared_array!(u32, 2);
        let (r, size) = (cluster::rank(), cluster::size());
        let peer = (r + 1) % size;
        // The peer must be running before its shared memory is written: a first barrier.
        cluster::sync();
        if thread::rank_in_block() == 0 {
            // SAFETY: slot 0 is this block's own, written by one thread; slot 1 of the peer
            // is written by the peer's neighbour only (this thread), and read by the peer
            // after the barrier below.
            unsafe {
                slots.write(0, 1000 * cluster::cluster_idx().x + r);
                cluster::map_shared_rank(slots.as_ptr(), peer)
                    .add(1)
                    .write(100 + r);
            }
        }
        // SAFETY: every thread of the cluster arrives once, then waits once.
        unsafe {
            cluster::arrive();
            cluster::wait();
        }
        if thread::rank_in_block() == 0 {
            // SAFETY: the peer has started (first barrier) and does not exit before the last
            // barrier below; its slot 0 was written before the split barrier.
            let theirs = unsafe { cluster::map_shared_rank(slots.as_ptr(), peer).read() };
            let b = grid::block_rank();
            // SAFETY: one thread per record.
            unsafe {
                out.write(4 * b, r);
                out.write(4 * b + 1, size);
                out.write(4 * b + 2, theirs);
                out.write(4 * b + 3, slots.get(1));
            }
        }
        // No block exits while its peer may still read its shared memory.
        cluster::sync();
    }
}

/// Cluster-wide sums through distributed shared-memory atomics (`cluster = (4, 1, 1)`):
/// every thread of the cluster adds its grid-stride share of `x` to an accumulator in the
/// shared memory of the cluster's block of rank 0 (`atom.shared::cluster`, cluster scope).
/// After a cluster barrier, block `b` writes `out[b]` = that accumulator, read through
/// distributed shared memory: `Σ x[i]` (wrapping) over the elements of its cluster's threads —
/// the same value in the four blocks of a cluster.
#[kernel(arch = "sm_90", cluster = (4, 1, 1))]
pub unsafe fn cluster_sum(x: Slice<u32>, out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let acc = shared_array!(u32, 1);
        if cluster::rank() == 0 && thread::rank_in_block() == 0 {
            // SAFETY: one thread; the others access it after the barrier below.
            unsafe { acc.write(0, 0) };
        }
        cluster::sync();
        let mut mine = 0u32;
        for i in thread::grid_stride(x.len()) {
            mine = mine.wrapping_add(x.get(i).unwrap_or(0));
        }
        // SAFETY: rank 0 has started (the barrier above) and exits only after the last
        // barrier below; every access to the accumulator until then is atomic, cluster scope.
        let total = unsafe { cluster::map_shared_rank(acc.as_ptr(), 0).atomic() };
        total.red_add(mine, Order::Relaxed, Scope::Cluster);
        cluster::sync();
        if thread::rank_in_block() == 0 {
            // SAFETY: as above; the additions happened before the barrier.
            let s = unsafe { cluster::map_shared_rank(acc.as_ptr(), 0).read() };
            // SAFETY: one thread per element.
            unsafe { out.write(grid::block_rank(), s) };
        }
        cluster::sync();
    }
}

/// The cluster registers under a 2-D grid of 2 × 2 clusters (`cluster = (2, 2, 1)`): block
/// `b` (linear rank in the grid) writes `out[10b ..]` = cluster rank, cluster size, the
/// block's index in its cluster (x, y), the cluster's shape (x, y), the cluster's index in
/// the grid (x, y), and the grid's shape in clusters (x, y).
#[kernel(arch = "sm_90", cluster = (2, 2, 1))]
pub unsafe fn cluster_registers(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        if thread::rank_in_block() == 0 {
            let (i, d, c, g) = (
                cluster::block_idx(),
                cluster::dim(),
                cluster::cluster_idx(),
                cluster::grid_dim(),
            );
            let b = grid::block_rank();
            let v = [
                cluster::rank(),
                cluster::size(),
                i.x,
                i.y,
                d.x,
                d.y,
                c.x,
                c.y,
                g.x,
                g.y,
            ];
            for (k, w) in v.into_iter().enumerate() {
                // SAFETY: one thread per record.
                unsafe { out.write(10 * b + k, w) };
            }
        }
    }
}

/// A non-portable cluster of 16 blocks (`non_portable_cluster`; H100 runs them): block `b`
/// writes `out[3b ..]` = cluster rank, cluster size, and the rank read back through
/// distributed shared memory from the block of rank `15 - rank`. Expected: `(b mod 16, 16,
/// 15 - b mod 16)`.
#[kernel(arch = "sm_90", cluster = (16, 1, 1), non_portable_cluster)]
pub unsafe fn cluster_wide(out: SliceMut<u32>) {
    #[cfg(target_arch = "nvptx64")]
    {
        let mine = shared_array!(u32, 1);
        let (r, size) = (cluster::rank(), cluster::size());
        if thread::rank_in_block() == 0 {
            // SAFETY: one writer; read by the peer after the barrier below.
            unsafe { mine.write(0, r) };
        }
        cluster::sync();
        if thread::rank_in_block() == 0 {
            // SAFETY: every block has started and written (the barrier above) and none exits
            // before the last barrier below.
            let theirs = unsafe { cluster::map_shared_rank(mine.as_ptr(), size - 1 - r).read() };
            let b = grid::block_rank();
            // SAFETY: one thread per record.
            unsafe {
                out.write(3 * b, r);
                out.write(3 * b + 1, size);
                out.write(3 * b + 2, theirs);
            }
        }
        cluster::sync();
    }
}
