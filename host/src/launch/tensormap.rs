//! Tensor-map arguments: the TMA descriptor (`CUtensorMap`) of an array argument, encoded on
//! the host when the launch packs its parameters, from the checked description and the box
//! and swizzle the kernel's `TensorMap` parameter declares (see `ferrocuda_abi::tensormap`).
//!
//! The array's axes are outermost first (CAI order); the driver takes them innermost first:
//! dimension `i` of the map is axis `rank - 1 - i`, its stride that axis's byte stride, and
//! its box extent the declared extent of that axis. Out-of-bounds elements of a box read as
//! zero (`CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE`), so partial tiles at the array's edges need no
//! special code in the kernel. L2 promotion is 256 bytes (CUTLASS's default for GEMM
//! operands).

use crate::driver::result as cu;
use crate::error::{Error, Result};
use crate::interop::cai::ArrayDesc;
use crate::module::Param;
use ferrocuda_abi::tensormap::{TENSOR_MAP_BYTES, TENSOR_MAP_MAX_RANK, TENSOR_MAP_PARAM_BYTES};

/// The driver's view of array `d`: dimensions and box innermost first, and the byte strides
/// of dimensions 1.. (an axis of extent 1, whose stride is never used, gets the smallest
/// valid one: a multiple of 16 at least its inner neighbour's span).
pub fn dimensions(d: &ArrayDesc, box_dims: &[u32]) -> Result<(Vec<u64>, Vec<u64>, Vec<u32>)> {
    let rank = d.ndim();
    if rank == 0 || rank > TENSOR_MAP_MAX_RANK || box_dims.len() != rank {
        return Err(Error::value(format!(
            "a {rank}-D array for a tensor map of {} axes",
            box_dims.len()
        )));
    }
    if d.size() == 0 {
        return Err(Error::value(
            "an empty array cannot be read through a tensor map (TMA needs every extent ≥ 1)",
        ));
    }
    let dims: Vec<u64> = d.shape().iter().rev().map(|&n| n as u64).collect();
    let mut strides = Vec::with_capacity(rank - 1);
    let mut span = d.itemsize() as u64 * dims[0];
    for (i, &n) in dims.iter().enumerate().skip(1) {
        let s = d.byte_strides()[rank - 1 - i];
        let s = if n == 1 {
            span.next_multiple_of(16)
        } else {
            s as u64
        };
        strides.push(s);
        span = s * n;
    }
    let boxes: Vec<u32> = box_dims.iter().rev().copied().collect();
    Ok((dims, strides, boxes))
}

/// Encodes the descriptor of array `d` for tensor-map parameter `p` into `slot` (its bytes in
/// the launch buffer: the descriptor, then the extents, outermost first). The array passed the launch's checks (layout
/// [`Tiled`](ferrocuda_abi::ArrayLayout::Tiled), device memory, element type, rank).
pub fn encode(p: &Param, d: &ArrayDesc, slot: &mut [u8]) -> Result<()> {
    let bad = |m: String| Error::value(m).with_arg(p.name.clone());
    let tile = p
        .tile
        .as_ref()
        .ok_or_else(|| bad("the manifest gives this tensor map no box".into()))?;
    let dtype = cu::tensor_map_data_type(d.dtype())
        .ok_or_else(|| bad(format!("TMA cannot copy {} elements", d.dtype().name())))?;
    let sw = cu::tensor_map_swizzle(tile.swizzle)
        .ok_or_else(|| bad(format!("swizzle of {} bytes", tile.swizzle)))?;
    let (dims, strides, boxes) =
        dimensions(d, &tile.box_dims).map_err(|e| e.with_arg(p.name.clone()))?;
    let mut map = [0u8; TENSOR_MAP_BYTES];
    let bytes = cu::tensor_map_encode_tiled(&mut map, dtype, d.ptr(), &dims, &strides, &boxes, sw)
        .map_err(|e| e.with_arg(p.name.clone()))?;
    if slot.len() < TENSOR_MAP_PARAM_BYTES {
        return Err(bad("the tensor map does not fit its parameter".into()));
    }
    slot[TENSOR_MAP_BYTES..TENSOR_MAP_PARAM_BYTES].fill(0);
    for (i, &n) in d.shape().iter().enumerate() {
        let at = TENSOR_MAP_BYTES + 8 * i;
        slot[at..at + 8].copy_from_slice(&(n as u64).to_ne_bytes());
    }
    slot[..bytes].copy_from_slice(&map[..bytes]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocuda_abi::DType;

    #[test]
    fn axes_go_innermost_first_and_unit_axes_get_a_valid_stride() {
        let d = ArrayDesc::from_parts(
            DType::BF16,
            &[4, 1, 300],
            Some(&[1280, 4, 2]),
            0x1000,
            false,
            None,
        )
        .unwrap();
        let (dims, strides, boxes) = dimensions(&d, &[2, 1, 64]).unwrap();
        assert_eq!(dims, [300, 1, 4]);
        // Axis 1 has extent 1: its stride 4 is replaced by 600 rounded up to 608.
        assert_eq!(strides, [608, 1280]);
        assert_eq!(boxes, [64, 1, 2]);
        let empty = ArrayDesc::from_parts(DType::F32, &[0, 4], None, 0, false, None).unwrap();
        assert!(dimensions(&empty, &[1, 4]).is_err());
        assert!(dimensions(&d, &[64]).is_err());
        assert!(cu::tensor_map_data_type(DType::C64).is_none());
        assert!(cu::tensor_map_data_type(DType::BF16).is_some());
        assert!(cu::tensor_map_swizzle(16).is_none());
        assert!(cu::tensor_map_swizzle(128).is_some());
    }
}
