//! The grid-stride loop's iterator, [`GridStride`] (re-exported by [`grid`](crate::grid) and
//! the crate root): independent of the target, so that it can be tested on the host, and
//! below [`thread`](crate::thread), whose `grid_stride` makes one.

/// Iterator over `start, start + step, …` below `end`: the indices one thread handles in a
/// grid-stride loop. Never overflows: it stops instead of wrapping.
///
/// ```
/// use ferrocuda_device::GridStride;
/// // Thread 3 of a grid of 8 threads over 20 elements:
/// let mine: Vec<usize> = GridStride::new(3, 8, 20).collect();
/// assert_eq!(mine, [3, 11, 19]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct GridStride {
    next: usize,
    step: usize,
    end: usize,
}

impl GridStride {
    /// Indices from `start` by `step` (≥ 1; 0 is treated as 1) while below `end`.
    #[inline(always)]
    pub const fn new(start: usize, step: usize, end: usize) -> Self {
        GridStride {
            next: start,
            step: if step == 0 { 1 } else { step },
            end,
        }
    }
}

impl Iterator for GridStride {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.next < self.end {
            let i = self.next;
            self.next = match i.checked_add(self.step) {
                Some(n) => n,
                None => self.end,
            };
            Some(i)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::GridStride;
    use std::vec::Vec;

    #[test]
    fn every_index_exactly_once() {
        for n in [0usize, 1, 7, 256, 1000, 1025] {
            for threads in [1usize, 3, 32, 256, 4096] {
                let mut seen = std::vec![0u8; n];
                for t in 0..threads {
                    for i in GridStride::new(t, threads, n) {
                        seen[i] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "n={n} threads={threads}");
            }
        }
    }

    #[test]
    fn stops_instead_of_wrapping() {
        let v: Vec<usize> = GridStride::new(usize::MAX - 1, 4, usize::MAX).collect();
        assert_eq!(v, [usize::MAX - 1]);
        let z: Vec<usize> = GridStride::new(0, 0, 3).collect();
        assert_eq!(z, [0, 1, 2]);
    }
}
