//! Shared arrays' element, vector and atomic accessors, run on the host over ordinary memory
//! (`from_raw`): the bounds and alignment checks abort (a device assertion) before any access.

use ferrocuda_device::shared::{SharedArray, SharedArray2};

#[repr(C, align(16))]
struct Aligned([u32; 16]);

#[test]
fn vectors_of_a_shared_array() {
    let mut mem = Aligned([0; 16]);
    // SAFETY: 16 elements used only through this handle, here.
    let a = unsafe { SharedArray::<u32, 16>::from_raw(mem.0.as_mut_ptr()) };
    // SAFETY: single-threaded; in bounds and aligned.
    unsafe {
        a.write_vector(4, [1, 2, 3, 4]);
        a.write_vector_unchecked(12, [9, 8, 7, 6]);
    }
    assert_eq!(a.get_vector::<4>(4), [1, 2, 3, 4]);
    // SAFETY: in bounds and aligned.
    assert_eq!(unsafe { a.get_vector_unchecked::<4>(12) }, [9, 8, 7, 6]);
    assert_eq!(a.get_vector::<4>(0), [0; 4]);
    assert_eq!(mem.0[4..8], [1, 2, 3, 4]);
    // The same memory as a 4×4 tile: row 3 is elements 12..16.
    // SAFETY: as above.
    let t = unsafe { SharedArray2::<u32, 4, 4>::from_raw(mem.0.as_mut_ptr()) };
    assert_eq!(t.get_vector::<4>(3, 0), [9, 8, 7, 6]);
    // SAFETY: single-threaded; in the tile and aligned.
    unsafe { t.write_vector(2, 0, [5, 5, 5, 5]) };
    assert_eq!(mem.0[8..12], [5, 5, 5, 5]);
}

fn array(mem: &mut Aligned) -> SharedArray<u32, 16> {
    // SAFETY: 16 elements used only through this handle.
    unsafe { SharedArray::<u32, 16>::from_raw(mem.0.as_mut_ptr()) }
}

#[test]
#[should_panic(expected = "device assertion failed")]
fn misaligned_shared_vectors_abort() {
    let _ = array(&mut Aligned([0; 16])).get_vector::<4>(2);
}

#[test]
#[should_panic(expected = "device assertion failed")]
fn shared_vectors_past_the_end_abort() {
    // SAFETY: single-threaded (the write aborts before it happens).
    unsafe { array(&mut Aligned([0; 16])).write_vector(16, [0u32; 4]) };
}

#[test]
fn atomic_views_of_a_shared_array() {
    let mut mem = Aligned([0; 16]);
    let a = array(&mut mem);
    assert_eq!(a.atomic(15).as_ptr(), a.as_mut_ptr().wrapping_add(15));
}

#[test]
#[should_panic(expected = "device assertion failed")]
fn atomic_views_past_the_end_abort() {
    let _ = array(&mut Aligned([0; 16])).atomic(16);
}

#[test]
#[should_panic(expected = "device assertion failed")]
fn tile_vectors_stay_in_their_row() {
    let mut mem = Aligned([0; 16]);
    // SAFETY: as above, 2×8.
    let t = unsafe { SharedArray2::<u32, 2, 8>::from_raw(mem.0.as_mut_ptr()) };
    // [0][6 .. 10] would run into row 1.
    let _ = t.get_vector::<4>(0, 6);
}
