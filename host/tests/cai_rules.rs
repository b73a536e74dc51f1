//! The array-interface rules as a table, through the public API: every producer's export,
//! every key's edge cases under both protocols, the exact descriptor of each valid case and
//! the kind, key and message of each invalid one; the typestr, byte-range, `from_parts` and
//! indexer rules; and a property check against enumerating the elements.

use ferrocuda_abi::DType;
use ferrocuda_host::interop::cai::{
    parse_typestr, validate, ArrayDesc, Protocol, RawInterface, RawValue,
};
use ferrocuda_host::stream::StreamRef;
use ferrocuda_host::{ErrorKind, Result};
use std::num::NonZeroU64;
use RawValue::{Missing, Value as V};

type R<T> = RawValue<T>;

/// An aligned device-looking address.
const P: u64 = 0x7f00_0000_1000;
const PI: i128 = P as i128;
const TOP: u64 = 0xFFFF_FFFF_FFFF_FFF0;

fn cuda(version: i128, shape: &'static [i128], typestr: &'static str) -> RawInterface<'static> {
    RawInterface {
        version: V(version),
        shape: V(shape),
        typestr: V(typestr),
        data: V((PI, false)),
        ..RawInterface::new(Protocol::Cuda)
    }
}

fn sycl(shape: &'static [i128], typestr: &'static str) -> RawInterface<'static> {
    RawInterface {
        protocol: Protocol::SyclUsm,
        ..cuda(1, shape, typestr)
    }
}

/// Every observable of a valid descriptor, exactly.
struct Want {
    version: u8,
    dtype: DType,
    shape: &'static [usize],
    strides: &'static [isize],
    ptr: u64,
    readonly: bool,
    stream: Option<StreamRef>,
    contig: bool,
    size: usize,
    range: Option<(u64, u64)>,
}

/// The usual expectation: version 3, writable, no stream; the rest is given.
fn want(
    dtype: DType,
    shape: &'static [usize],
    strides: &'static [isize],
    contig: bool,
    size: usize,
    range: Option<(u64, u64)>,
) -> Want {
    Want {
        version: 3,
        dtype,
        shape,
        strides,
        ptr: P,
        readonly: false,
        stream: None,
        contig,
        size,
        range,
    }
}

enum Expect {
    Ok(Want),
    /// Kind, key, and a substring the message must contain.
    Err(ErrorKind, &'static str, &'static str),
}
use Expect::Err as E;

fn handle(h: u64) -> Option<StreamRef> {
    Some(StreamRef::Handle(NonZeroU64::new(h).unwrap()))
}

const HUGE: i128 = 1 << 64; // u64::MAX + 1
static AXES_33: [i128; 33] = [1; 33];
static AXES_32: [i128; 32] = [1; 32];

#[rustfmt::skip]
fn cases() -> Vec<(&'static str, RawInterface<'static>, Expect)> {
    use DType::*;
    use ErrorKind::{Type, Unsupported, Value};
    vec![
        // ---- producers as they export today ----------------------------------------
        ("cupy v3: C-contiguous f32 (2,3), descr, strides None, stream 1",
         RawInterface { descr: V(&[("", "<f4")]), strides: R::None, stream: V(1), ..cuda(3, &[2, 3], "<f4") },
         Expect::Ok(Want { stream: Some(StreamRef::Legacy), ..want(F32, &[2, 3], &[12, 4], true, 6, Some((P, P + 24))) })),
        ("cupy v3: transposed (3,2) view of a (2,3) f32",
         RawInterface { descr: V(&[("", "<f4")]), strides: V(&[4, 12]), stream: V(1), ..cuda(3, &[3, 2], "<f4") },
         Expect::Ok(Want { stream: Some(StreamRef::Legacy), ..want(F32, &[3, 2], &[4, 12], false, 6, Some((P, P + 24))) })),
        ("cupy v3: step slice a[::2] of 10 f64",
         RawInterface { strides: V(&[16]), stream: V(1), ..cuda(3, &[5], "<f8") },
         Expect::Ok(Want { stream: Some(StreamRef::Legacy), ..want(F64, &[5], &[16], false, 5, Some((P, P + 72))) })),
        ("pytorch v2: no stream key, int64 (4,)",
         cuda(2, &[4], "<i8"),
         Expect::Ok(Want { version: 2, ..want(I64, &[4], &[8], true, 4, Some((P, P + 32))) })),
        ("pytorch v2: transposed f16 tensor, strides in bytes",
         RawInterface { strides: V(&[2, 6]), ..cuda(2, &[3, 4], "<f2") },
         Expect::Ok(Want { version: 2, ..want(F16, &[3, 4], &[2, 6], false, 12, Some((P, P + 24))) })),
        ("pytorch v2: bool tensor |b1",
         cuda(2, &[8], "|b1"),
         Expect::Ok(Want { version: 2, ..want(Bool, &[8], &[1], true, 8, Some((P, P + 8))) })),
        ("jax v2: read-only f32 (16,)",
         RawInterface { data: V((PI, true)), ..cuda(2, &[16], "<f4") },
         Expect::Ok(Want { version: 2, readonly: true, ..want(F32, &[16], &[4], true, 16, Some((P, P + 64))) })),
        ("numba v3: stream None on the default stream, strides None",
         RawInterface { strides: R::None, stream: R::None, ..cuda(3, &[2, 2], "<f8") },
         Expect::Ok(want(F64, &[2, 2], &[16, 8], true, 4, Some((P, P + 32))))),
        ("numba v3: a stream handle",
         RawInterface { stream: V(0x55d0_c0a1_b2c0), ..cuda(3, &[3], "<u4") },
         Expect::Ok(Want { stream: handle(0x55d0_c0a1_b2c0), ..want(U32, &[3], &[4], true, 3, Some((P, P + 12))) })),
        // ---- versions ---------------------------------------------------------------
        ("version 0 accepted",
         cuda(0, &[3], "<i4"),
         Expect::Ok(Want { version: 0, ..want(I32, &[3], &[4], true, 3, Some((P, P + 12))) })),
        ("version 1 accepted",
         cuda(1, &[3], "<i4"),
         Expect::Ok(Want { version: 1, ..want(I32, &[3], &[4], true, 3, Some((P, P + 12))) })),
        ("version 2 accepted, 3-D C order computed",
         cuda(2, &[2, 3, 4], "<i2"),
         Expect::Ok(Want { version: 2, ..want(I16, &[2, 3, 4], &[24, 8, 2], true, 24, Some((P, P + 48))) })),
        ("version 3, stream 2 = per-thread default stream",
         RawInterface { stream: V(2), ..cuda(3, &[2], "<f4") },
         Expect::Ok(Want { stream: Some(StreamRef::PerThread), ..want(F32, &[2], &[4], true, 2, Some((P, P + 8))) })),
        ("version 2 with a stream key: honoured",
         RawInterface { stream: V(7), ..cuda(2, &[2], "<f4") },
         Expect::Ok(Want { version: 2, stream: handle(7), ..want(F32, &[2], &[4], true, 2, Some((P, P + 8))) })),
        ("version Missing", RawInterface { version: Missing, ..cuda(3, &[2], "<f4") }, E(Value, "version", "required key is missing")),
        ("version None", RawInterface { version: R::None, ..cuda(3, &[2], "<f4") }, E(Value, "version", "required key is None")),
        ("version 4", cuda(4, &[2], "<f4"), E(Value, "version", "supported versions are 0, 1, 2, 3")),
        ("version -1", cuda(-1, &[2], "<f4"), E(Value, "version", "unsupported version -1")),
        ("version 2**100", cuda(1 << 100, &[2], "<f4"), E(Value, "version", "unsupported version")),
        // ---- shapes -----------------------------------------------------------------
        ("rank 0: a scalar has one element",
         cuda(3, &[], "<f8"),
         Expect::Ok(want(F64, &[], &[], true, 1, Some((P, P + 8))))),
        ("zero-size with pointer 0",
         RawInterface { data: V((0, false)), ..cuda(3, &[0], "<f4") },
         Expect::Ok(Want { ptr: 0, ..want(F32, &[0], &[4], true, 0, None) })),
        ("zero-size (3,0) with odd strides and pointer 0",
         RawInterface { data: V((0, false)), strides: V(&[7, -5]), ..cuda(3, &[3, 0], "<f4") },
         Expect::Ok(Want { ptr: 0, ..want(F32, &[3, 0], &[7, -5], true, 0, None) })),
        ("zero-size with a misaligned pointer: nothing is touched",
         RawInterface { data: V((0x1001, false)), ..cuda(3, &[0, 5], "<f4") },
         Expect::Ok(Want { ptr: 0x1001, ..want(F32, &[0, 5], &[20, 4], true, 0, None) })),
        ("zero-size C strides count extent 0 as 1",
         cuda(3, &[3, 0, 2], "<f8"),
         Expect::Ok(want(F64, &[3, 0, 2], &[16, 16, 8], true, 0, None))),
        ("32 axes of extent 1",
         cuda(3, &AXES_32, "<f4"),
         Expect::Ok(want(F32, &[1; 32], &[4; 32], true, 1, Some((P, P + 4))))),
        ("broadcast of 2**63 elements through a zero stride",
         RawInterface { strides: V(&[0]), ..cuda(3, &[1 << 63], "<f4") },
         Expect::Ok(want(F32, &[1 << 63], &[0], false, 1 << 63, Some((P, P + 4))))),
        ("shape Missing", RawInterface { shape: Missing, ..cuda(3, &[2], "<f4") }, E(Value, "shape", "required key is missing")),
        ("shape None", RawInterface { shape: R::None, ..cuda(3, &[2], "<f4") }, E(Value, "shape", "required key is None")),
        ("negative extent", cuda(3, &[2, -3], "<f4"), E(Value, "shape", "shape[1] = -3 is negative")),
        ("extent beyond usize", cuda(3, &[HUGE], "<f4"), E(Value, "shape", "does not fit usize")),
        ("33 axes", cuda(3, &AXES_33, "<f4"), E(Value, "shape", "33 axes; at most 32")),
        ("element count overflows", cuda(3, &[1 << 32, 1 << 32], "<f4"), E(Value, "shape", "overflows usize")),
        ("element count overflows even with an extent 0", cuda(3, &[0, 1 << 32, 1 << 32], "<f4"), E(Value, "shape", "overflows usize")),
        ("C-contiguous bytes overflow isize", cuda(3, &[1 << 62], "<f4"), E(Value, "shape", "extent overflows")),
        // ---- typestr and descr ------------------------------------------------------
        ("'<u1': '<' on a one-byte type", cuda(3, &[2], "<u1"), Expect::Ok(want(U8, &[2], &[1], true, 2, Some((P, P + 2))))),
        ("'|i1'", cuda(3, &[2], "|i1"), Expect::Ok(want(I8, &[2], &[1], true, 2, Some((P, P + 2))))),
        ("'>i1': byte order is moot for one byte", cuda(3, &[2], ">i1"), Expect::Ok(want(I8, &[2], &[1], true, 2, Some((P, P + 2))))),
        ("'=f4': native order is little-endian", cuda(3, &[2], "=f4"), Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
        ("'<u2'", cuda(3, &[2], "<u2"), Expect::Ok(want(U16, &[2], &[2], true, 2, Some((P, P + 4))))),
        ("'<u8'", cuda(3, &[2], "<u8"), Expect::Ok(want(U64, &[2], &[8], true, 2, Some((P, P + 16))))),
        ("'<c8'", cuda(3, &[2], "<c8"), Expect::Ok(want(C64, &[2], &[8], true, 2, Some((P, P + 16))))),
        ("'<c16'", cuda(3, &[2], "<c16"), Expect::Ok(want(C128, &[2], &[16], true, 2, Some((P, P + 32))))),
        ("'<V2': bfloat16 as ml_dtypes, PyTorch and JAX write it", cuda(3, &[2], "<V2"), Expect::Ok(want(BF16, &[2], &[2], true, 2, Some((P, P + 4))))),
        ("descr of ml_dtypes' bfloat16", RawInterface { descr: V(&[("", "<V2")]), ..cuda(3, &[2], "<V2") }, Expect::Ok(want(BF16, &[2], &[2], true, 2, Some((P, P + 4))))),
        ("'|V2': NumPy's void is not bfloat16", cuda(3, &[2], "|V2"), E(Type, "typestr", "opaque element type \"|V2\" (NumPy's void) is not supported; bfloat16 arrays are exported as \"<V2\"")),
        ("'<V4': no 4-byte opaque type", cuda(3, &[2], "<V4"), E(Type, "typestr", "unsupported element type \"<V4\"")),
        ("descr None", RawInterface { descr: R::None, ..cuda(3, &[2], "<f4") }, Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
        ("descr for '|b1'", RawInterface { descr: V(&[("", "|b1")]), ..cuda(3, &[2], "|b1") }, Expect::Ok(want(Bool, &[2], &[1], true, 2, Some((P, P + 2))))),
        ("descr '=f4' for '<f4': same type", RawInterface { descr: V(&[("", "=f4")]), ..cuda(3, &[2], "<f4") }, Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
        ("typestr Missing", RawInterface { typestr: Missing, ..cuda(3, &[2], "<f4") }, E(Value, "typestr", "required key is missing")),
        ("typestr None", RawInterface { typestr: R::None, ..cuda(3, &[2], "<f4") }, E(Value, "typestr", "required key is None")),
        ("'|V8' structured/void", cuda(3, &[2], "|V8"), E(Type, "typestr", "unsupported element type \"|V8\"")),
        ("'|O8' object", cuda(3, &[2], "|O8"), E(Type, "typestr", "unsupported element type \"|O8\"")),
        ("'<M8' datetime", cuda(3, &[2], "<M8"), E(Type, "typestr", "\"<M8\"")),
        ("'|S5' bytes", cuda(3, &[2], "|S5"), E(Type, "typestr", "\"|S5\"")),
        ("'<U4' unicode", cuda(3, &[2], "<U4"), E(Type, "typestr", "\"<U4\"")),
        ("'<f16' long double", cuda(3, &[2], "<f16"), E(Type, "typestr", "unsupported element type \"<f16\"; supported: |b1, |i1, <i2")),
        ("'<i3' odd size", cuda(3, &[2], "<i3"), E(Type, "typestr", "\"<i3\"")),
        ("'<f99999999999999999999' huge size", cuda(3, &[2], "<f99999999999999999999"), E(Type, "typestr", "unsupported element type")),
        ("'garbage'", cuda(3, &[2], "garbage"), E(Type, "typestr", "malformed typestr \"garbage\"")),
        ("empty typestr", cuda(3, &[2], ""), E(Type, "typestr", "malformed typestr \"\"")),
        ("'<f' without a size", cuda(3, &[2], "<f"), E(Type, "typestr", "malformed")),
        ("'<f4x' trailing garbage", cuda(3, &[2], "<f4x"), E(Type, "typestr", "malformed")),
        ("'?f4' unknown byte order", cuda(3, &[2], "?f4"), E(Type, "typestr", "malformed")),
        ("'>f4' big-endian", cuda(3, &[2], ">f4"), E(Type, "typestr", "big-endian element type \">f4\"")),
        ("'|f4' under the CAI", cuda(3, &[2], "|f4"), E(Value, "typestr", "expected '<' (NumPy writes \"<f4\")")),
        ("descr with two fields", RawInterface { descr: V(&[("a", "<f4"), ("b", "<i4")]), ..cuda(3, &[2], "<f4") }, E(Unsupported, "descr", "2 fields")),
        ("descr with a named field", RawInterface { descr: V(&[("x", "<f4")]), ..cuda(3, &[2], "<f4") }, E(Unsupported, "descr", "named field \"x\"")),
        ("descr type differs from typestr", RawInterface { descr: V(&[("", "<i4")]), ..cuda(3, &[2], "<f4") }, E(Unsupported, "descr", "differs from typestr")),
        ("descr empty", RawInterface { descr: V(&[]), ..cuda(3, &[2], "<f4") }, E(Value, "descr", "empty list")),
        // ---- mask -------------------------------------------------------------------
        ("mask None", RawInterface { mask: R::None, ..cuda(3, &[2], "<f4") }, Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
        ("mask present", RawInterface { mask: V(()), ..cuda(3, &[2], "<f4") }, E(Unsupported, "mask", "masked arrays are not supported")),
        ("mask present on v0 too", RawInterface { mask: V(()), ..cuda(0, &[2], "<f4") }, E(Unsupported, "mask", "masked arrays are not supported")),
        // ---- data -------------------------------------------------------------------
        ("pointer at the top of the address space",
         RawInterface { data: V((TOP as i128, false)), ..cuda(3, &[1], "<f8") },
         Expect::Ok(Want { ptr: TOP, ..want(F64, &[1], &[8], true, 1, Some((TOP, TOP + 8))) })),
        ("data Missing", RawInterface { data: Missing, ..cuda(3, &[2], "<f4") }, E(Value, "data", "required key is missing")),
        ("data None", RawInterface { data: R::None, ..cuda(3, &[2], "<f4") }, E(Value, "data", "required key is None")),
        ("negative pointer", RawInterface { data: V((-8, false)), ..cuda(3, &[2], "<f4") }, E(Value, "data", "pointer -8 is not an address")),
        ("pointer beyond 64 bits", RawInterface { data: V((HUGE, false)), ..cuda(3, &[2], "<f4") }, E(Value, "data", "is not an address")),
        ("null pointer for a non-empty array", RawInterface { data: V((0, false)), ..cuda(3, &[2], "<f4") }, E(Value, "data", "null pointer")),
        ("misaligned f32 pointer", RawInterface { data: V((0x1002, false)), ..cuda(3, &[2], "<f4") }, E(Value, "data", "0x1002 is not aligned to the item size (4 bytes of float32)")),
        ("complex128 at 8 mod 16", RawInterface { data: V((0x1008, false)), ..cuda(3, &[2], "<c16") }, E(Value, "data", "not aligned")),
        // ---- strides ----------------------------------------------------------------
        ("reversed a[::-1] of 5 f32: negative stride",
         RawInterface { data: V((PI + 16, false)), strides: V(&[-4]), ..cuda(3, &[5], "<f4") },
         Expect::Ok(Want { ptr: P + 16, ..want(F32, &[5], &[-4], false, 5, Some((P, P + 20))) })),
        ("broadcast axis: zero stride",
         RawInterface { strides: V(&[0, 4]), ..cuda(3, &[3, 4], "<f4") },
         Expect::Ok(want(F32, &[3, 4], &[0, 4], false, 12, Some((P, P + 16))))),
        ("explicit C strides are contiguous",
         RawInterface { strides: V(&[24, 8, 2]), ..cuda(3, &[2, 3, 4], "<i2") },
         Expect::Ok(want(I16, &[2, 3, 4], &[24, 8, 2], true, 24, Some((P, P + 48))))),
        ("Fortran order is not C-contiguous",
         RawInterface { strides: V(&[4, 8]), ..cuda(3, &[2, 3], "<f4") },
         Expect::Ok(want(F32, &[2, 3], &[4, 8], false, 6, Some((P, P + 24))))),
        ("extent-1 axis with any stride is still contiguous",
         RawInterface { strides: V(&[1234, 4]), ..cuda(3, &[1, 4], "<f4") },
         Expect::Ok(want(F32, &[1, 4], &[1234, 4], true, 4, Some((P, P + 16))))),
        ("non-multiple stride kept by the descriptor",
         RawInterface { strides: V(&[6]), ..cuda(3, &[3], "<f4") },
         Expect::Ok(want(F32, &[3], &[6], false, 3, Some((P, P + 16))))),
        ("strides length mismatch", RawInterface { strides: V(&[4]), ..cuda(3, &[2, 2], "<f4") }, E(Value, "strides", "1 strides for 2 axes")),
        ("strides length mismatch on an empty array", RawInterface { data: V((0, false)), strides: V(&[4, 4, 4]), ..cuda(3, &[0, 2], "<f4") }, E(Value, "strides", "3 strides for 2 axes")),
        ("stride beyond isize::MAX", RawInterface { strides: V(&[isize::MAX as i128 + 1]), ..cuda(3, &[2], "<f4") }, E(Value, "strides", "strides[0] = 9223372036854775808 does not fit isize")),
        ("stride below isize::MIN", RawInterface { strides: V(&[isize::MIN as i128 - 1]), ..cuda(3, &[2], "<f4") }, E(Value, "strides", "does not fit isize")),
        ("huge stride: extent overflows isize", RawInterface { strides: V(&[1 << 62]), ..cuda(3, &[3], "<f4") }, E(Value, "strides", "extent overflows")),
        ("two huge strides: sum overflows isize", RawInterface { strides: V(&[1 << 62, 1 << 62]), ..cuda(3, &[2, 2], "<f4") }, E(Value, "strides", "extent overflows")),
        ("negative stride reaching below address 0", RawInterface { data: V((0x1000, false)), strides: V(&[-8]), ..cuda(3, &[1000], "<f8") }, E(Value, "data", "extent overflows")),
        ("end beyond the 64-bit address space", RawInterface { data: V((TOP as i128, false)), ..cuda(3, &[2], "<f8") }, E(Value, "data", "extent overflows")),
        // ---- stream -----------------------------------------------------------------
        ("stream 0", RawInterface { stream: V(0), ..cuda(3, &[2], "<f4") }, E(Value, "stream", "use 1 for the legacy default stream, 2 for the per-thread default stream")),
        ("stream -1", RawInterface { stream: V(-1), ..cuda(3, &[2], "<f4") }, E(Value, "stream", "stream -1 is not a stream handle")),
        ("stream 2**64", RawInterface { stream: V(HUGE), ..cuda(3, &[2], "<f4") }, E(Value, "stream", "is not a stream handle")),
        ("stream u64::MAX is a handle",
         RawInterface { stream: V(u64::MAX as i128), ..cuda(3, &[2], "<f4") },
         Expect::Ok(Want { stream: handle(u64::MAX), ..want(F32, &[2], &[4], true, 2, Some((P, P + 8))) })),
        // ---- offset under the CAI ---------------------------------------------------
        ("CAI offset 0 is harmless", RawInterface { offset: V(0), ..cuda(3, &[2], "<f4") }, Expect::Ok(want(F32, &[2], &[4], true, 2, Some((P, P + 8))))),
        ("CAI offset 4 is unsupported", RawInterface { offset: V(4), ..cuda(3, &[2], "<f4") }, E(Unsupported, "offset", "no 'offset' key")),
        // ---- SYCL USM ---------------------------------------------------------------
        ("sycl v1: element strides become bytes, '|f4' accepted",
         RawInterface { strides: V(&[1, 3]), ..sycl(&[3, 2], "|f4") },
         Expect::Ok(Want { version: 1, ..want(F32, &[3, 2], &[4, 12], false, 6, Some((P, P + 24))) })),
        ("sycl: offset in elements moves the pointer",
         RawInterface { offset: V(2), ..sycl(&[4], "|f8") },
         Expect::Ok(Want { version: 1, ptr: P + 16, ..want(F64, &[4], &[8], true, 4, Some((P + 16, P + 48))) })),
        ("sycl: offset None = 0, '<' accepted too",
         RawInterface { offset: R::None, ..sycl(&[2], "<i4") },
         Expect::Ok(Want { version: 1, ..want(I32, &[2], &[4], true, 2, Some((P, P + 8))) })),
        ("sycl: a stream key is ignored",
         RawInterface { stream: V(0), ..sycl(&[2], "|f4") },
         Expect::Ok(Want { version: 1, ..want(F32, &[2], &[4], true, 2, Some((P, P + 8))) })),
        ("sycl: zero-size with pointer 0",
         RawInterface { data: V((0, false)), offset: V(0), ..sycl(&[0], "|f4") },
         Expect::Ok(Want { version: 1, ptr: 0, ..want(F32, &[0], &[4], true, 0, None) })),
        ("sycl: version 2", RawInterface { version: V(2), ..sycl(&[2], "|f4") }, E(Value, "version", "the supported version is 1")),
        ("sycl: version 3", RawInterface { version: V(3), ..sycl(&[2], "|f4") }, E(Value, "version", "unsupported version 3")),
        ("sycl: version Missing", RawInterface { version: Missing, ..sycl(&[2], "|f4") }, E(Value, "version", "required key is missing")),
        ("sycl: data Missing", RawInterface { data: Missing, ..sycl(&[2], "|f4") }, E(Value, "data", "required key is missing")),
        ("sycl: negative offset", RawInterface { offset: V(-1), ..sycl(&[2], "|f4") }, E(Value, "offset", "offset -1 is negative")),
        ("sycl: offset overflows the address", RawInterface { offset: V(1 << 62), ..sycl(&[2], "|f4") }, E(Value, "offset", "overflows a 64-bit address")),
        ("sycl: null data with an offset", RawInterface { data: V((0, false)), offset: V(4), ..sycl(&[2], "|f4") }, E(Value, "data", "null pointer")),
        ("sycl: element stride too big in bytes", RawInterface { strides: V(&[1 << 62]), ..sycl(&[2], "|f4") }, E(Value, "strides", "elements of 4 bytes does not fit isize")),
        ("sycl: misaligned data", RawInterface { data: V((0x1001, false)), ..sycl(&[2], "|f4") }, E(Value, "data", "not aligned")),
        ("sycl: mask present", RawInterface { mask: V(()), ..sycl(&[2], "|f4") }, E(Unsupported, "mask", "masked arrays")),
        ("sycl: big-endian", sycl(&[2], ">f8"), E(Type, "typestr", "big-endian")),
    ]
}

#[test]
fn table() {
    let cases = cases();
    assert!(cases.len() >= 60, "only {} cases", cases.len());
    for (name, raw, expect) in cases {
        let got = validate(&raw);
        match (expect, got) {
            (Expect::Ok(w), Ok(a)) => {
                assert_eq!(a.protocol(), raw.protocol, "{name}: protocol");
                assert_eq!(a.version(), w.version, "{name}: version");
                assert_eq!(a.dtype(), w.dtype, "{name}: dtype");
                assert_eq!(a.itemsize(), w.dtype.itemsize(), "{name}: itemsize");
                assert_eq!(a.ndim(), w.shape.len(), "{name}: ndim");
                assert_eq!(a.shape(), w.shape, "{name}: shape");
                assert_eq!(a.byte_strides(), w.strides, "{name}: strides");
                assert_eq!(a.ptr(), w.ptr, "{name}: ptr");
                assert_eq!(a.readonly(), w.readonly, "{name}: readonly");
                assert_eq!(a.stream(), w.stream, "{name}: stream");
                assert_eq!(a.is_c_contiguous(), w.contig, "{name}: contiguity");
                assert_eq!(a.size(), w.size, "{name}: size");
                assert_eq!(a.is_empty(), w.size == 0, "{name}: is_empty");
                assert_eq!(a.byte_range(), w.range, "{name}: byte_range");
            }
            (Expect::Err(kind, key, text), Err(e)) => {
                assert_eq!(e.kind(), kind, "{name}: kind of {e}");
                assert_eq!(e.key(), Some(key), "{name}: key of {e}");
                assert_eq!(e.arg(), None, "{name}: arg of {e}");
                let shown = e.to_string();
                let prefix = format!("{}['{key}']: ", raw.protocol.key());
                assert!(
                    shown.starts_with(&prefix),
                    "{name}: {shown:?} lacks {prefix:?}"
                );
                assert!(shown.contains(text), "{name}: {shown:?} lacks {text:?}");
                // The argument name is added by the caller, in front.
                let named = e.with_arg("x").to_string();
                assert_eq!(named, format!("argument `x`: {shown}"), "{name}");
            }
            (Expect::Ok(_), Err(e)) => panic!("{name}: expected Ok, got {e}"),
            (Expect::Err(kind, key, _), Ok(a)) => {
                panic!("{name}: expected {kind:?} on {key}, got {a:?}")
            }
        }
    }
}

#[test]
fn protocol_keys_and_new() {
    assert_eq!(Protocol::Cuda.key(), "__cuda_array_interface__");
    assert_eq!(Protocol::SyclUsm.key(), "__sycl_usm_array_interface__");
    let raw = RawInterface::new(Protocol::SyclUsm);
    assert_eq!(raw.protocol, Protocol::SyclUsm);
    assert_eq!(raw.version, Missing);
    assert_eq!(raw.shape, Missing);
    assert_eq!(raw.typestr, Missing);
    assert_eq!(raw.data, Missing);
    assert_eq!(raw.strides, Missing);
    assert_eq!(raw.descr, Missing);
    assert_eq!(raw.mask, Missing);
    assert_eq!(raw.stream, Missing);
    assert_eq!(raw.offset, Missing);
    assert_eq!(V(3).into_option(), Some(3));
    assert_eq!(R::<i32>::None.into_option(), None);
    assert_eq!(R::<i32>::Missing.into_option(), None);
}

#[test]
fn every_dtype_typestr_round_trips() {
    for d in DType::ALL {
        assert_eq!(parse_typestr(Protocol::Cuda, d.typestr()).unwrap(), d);
        assert_eq!(parse_typestr(Protocol::SyclUsm, d.typestr()).unwrap(), d);
        // dpctl's spelling: '|' for every type.
        let dpctl = format!("|{}", &d.typestr()[1..]);
        assert_eq!(parse_typestr(Protocol::SyclUsm, &dpctl).unwrap(), d);
        let native = format!("={}", &d.typestr()[1..]);
        assert_eq!(parse_typestr(Protocol::Cuda, &native).unwrap(), d);
    }
    let e = parse_typestr(Protocol::Cuda, "|f8").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e
        .to_string()
        .starts_with("__cuda_array_interface__['typestr']: "));
    let long = "x".repeat(100);
    let e = parse_typestr(Protocol::SyclUsm, &long).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type);
    assert!(e
        .to_string()
        .starts_with("__sycl_usm_array_interface__['typestr']: "));
    assert!(
        e.message().contains(&format!("\"{}\"…", "x".repeat(24))),
        "{e}"
    );
}

#[test]
fn byte_range_exact() {
    let f = |dtype, shape: &[usize], strides: Option<&[isize]>, ptr| {
        ArrayDesc::from_parts(dtype, shape, strides, ptr, false, None)
            .unwrap()
            .byte_range()
    };
    // C order: one contiguous block.
    assert_eq!(f(DType::F32, &[2, 3], None, 0x1000), Some((0x1000, 0x1018)));
    // Reversed axis: ptr is the highest element.
    assert_eq!(
        f(DType::F64, &[4], Some(&[-8]), 0x1018),
        Some((0x1000, 0x1020))
    );
    // Mixed signs: lo from the negative axis, hi from the positive one.
    assert_eq!(
        f(DType::I32, &[3, 2], Some(&[-16, 4]), 0x2000),
        Some((0x2000 - 32, 0x2000 + 4 + 4))
    );
    // Broadcast: every element at ptr.
    assert_eq!(
        f(DType::U8, &[100, 100], Some(&[0, 0]), 0x10),
        Some((0x10, 0x11))
    );
    // Scalar and empty.
    assert_eq!(f(DType::C128, &[], None, 0x100), Some((0x100, 0x110)));
    assert_eq!(f(DType::C128, &[5, 0], None, 0), None);
    // Strided sub-array a[1:3, ::2] of a (4, 6) f32 at 0x1000: ptr 0x1018.
    assert_eq!(
        f(DType::F32, &[2, 3], Some(&[24, 8]), 0x1018),
        Some((0x1018, 0x1018 + 24 + 16 + 4))
    );
}

#[test]
fn from_parts_validates_like_validate() {
    let a = ArrayDesc::from_parts(
        DType::F32,
        &[2, 3],
        None,
        P,
        true,
        Some(StreamRef::PerThread),
    )
    .unwrap();
    assert_eq!(a.protocol(), Protocol::Cuda);
    assert_eq!(a.version(), 3);
    assert_eq!(a.byte_strides(), &[12, 4]);
    assert!(a.readonly());
    assert_eq!(a.stream(), Some(StreamRef::PerThread));
    // The same array through validate compares equal.
    let raw = RawInterface {
        data: V((PI, true)),
        stream: V(2),
        ..cuda(3, &[2, 3], "<f4")
    };
    assert_eq!(validate(&raw).unwrap(), a);

    let err = |r: Result<ArrayDesc>| {
        let e = r.unwrap_err();
        (e.kind(), e.key().map(str::to_owned))
    };
    let value = |k: &str| (ErrorKind::Value, Some(k.to_owned()));
    let fp = ArrayDesc::from_parts;
    assert_eq!(
        err(fp(DType::F32, &[2], None, 0, false, None)),
        value("data")
    );
    assert_eq!(
        err(fp(DType::F32, &[2], None, P + 2, false, None)),
        value("data")
    );
    assert_eq!(
        err(fp(DType::F32, &[2], Some(&[4, 4]), P, false, None)),
        value("strides")
    );
    assert_eq!(
        err(fp(DType::F32, &[1; 33], None, P, false, None)),
        value("shape")
    );
    assert_eq!(
        err(fp(DType::F32, &[usize::MAX, 2], None, P, false, None)),
        value("shape")
    );
    assert_eq!(
        err(fp(DType::F64, &[3], Some(&[isize::MAX]), P, false, None)),
        value("strides")
    );
    let e = fp(DType::F32, &[2], None, 0, false, None).unwrap_err();
    assert!(e
        .to_string()
        .starts_with("__cuda_array_interface__['data']: null pointer"));
    // Empty arrays take any pointer and strides.
    let e = fp(DType::F32, &[0, 2], Some(&[3, -7]), 0, false, None).unwrap();
    assert_eq!(e.size(), 0);
    assert_eq!(e.byte_range(), None);
}

#[test]
fn indexer_for_kernels() {
    // Transposed (3, 2) view of a (2, 3) f32.
    let t = ArrayDesc::from_parts(DType::F32, &[3, 2], Some(&[4, 12]), P, false, None).unwrap();
    let ix = t.indexer::<2>().unwrap();
    assert_eq!(ix.shape, [3, 2]);
    assert_eq!(ix.strides, [1, 3]);
    assert_eq!(ix.offset([2, 1]), 5);
    // Reversed f64 axis.
    let r = ArrayDesc::from_parts(DType::F64, &[4], Some(&[-8]), P + 24, false, None).unwrap();
    let ix = r.indexer::<1>().unwrap();
    assert_eq!(ix.strides, [-1]);
    let (lo, hi) = ix.extent().unwrap();
    let (blo, bhi) = r.byte_range().unwrap();
    assert_eq!((r.ptr() as i128 + lo as i128 * 8) as u64, blo);
    assert_eq!((r.ptr() as i128 + hi as i128 * 8 + 8) as u64, bhi);
    // Scalar.
    let s = ArrayDesc::from_parts(DType::I8, &[], None, P, false, None).unwrap();
    assert_eq!(s.indexer::<0>().unwrap().size(), 1);

    // Wrong rank: Type error naming the shape key.
    let e = t.indexer::<3>().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Type);
    assert_eq!(e.key(), Some("shape"));
    assert_eq!(
        e.to_string(),
        "__cuda_array_interface__['shape']: expected a 3-D array, got a 2-D array of shape [3, 2]"
    );
    // Non-multiple stride on a real axis: Value error naming strides.
    let odd = ArrayDesc::from_parts(DType::F32, &[3], Some(&[6]), P, false, None).unwrap();
    let e = odd.indexer::<1>().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert_eq!(e.key(), Some("strides"));
    assert!(
        e.to_string()
            .contains("strides[0] = 6 bytes is not a multiple"),
        "{e}"
    );
    // ... but harmless on an axis of extent 1 or an empty array: becomes 0.
    let one = ArrayDesc::from_parts(DType::F32, &[1, 4], Some(&[1234, 4]), P, false, None).unwrap();
    assert_eq!(one.indexer::<2>().unwrap().strides, [0, 1]);
    let empty = ArrayDesc::from_parts(DType::F32, &[0, 4], Some(&[6, 5]), 0, false, None).unwrap();
    assert_eq!(empty.indexer::<2>().unwrap().strides, [0, 0]);
    // SYCL errors name their protocol.
    let raw = RawInterface {
        strides: V(&[1, 3]),
        ..sycl(&[3, 2], "|f4")
    };
    let e = validate(&raw).unwrap().indexer::<1>().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("__sycl_usm_array_interface__['shape']: "),
        "{e}"
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// byte_range and the indexer agree with visiting every element.
        #[test]
        fn byte_range_matches_enumeration(
            shape in proptest::collection::vec(1usize..5, 0..4),
            raw_strides in proptest::collection::vec(-6isize..7, 4),
            dtype in proptest::sample::select(DType::ALL.to_vec()),
        ) {
            let item = dtype.itemsize() as isize;
            let strides: Vec<isize> =
                raw_strides[..shape.len()].iter().map(|s| s * item).collect();
            let ptr = 0x10_0000u64;
            let a = ArrayDesc::from_parts(dtype, &shape, Some(&strides), ptr, false, None)
                .unwrap();
            let size: usize = shape.iter().product();
            prop_assert_eq!(a.size(), size);
            let (mut lo, mut hi) = (i128::MAX, i128::MIN);
            for linear in 0..size {
                let mut rest = linear;
                let mut off = 0i128;
                for d in (0..shape.len()).rev() {
                    off += (rest % shape[d]) as i128 * strides[d] as i128;
                    rest /= shape[d];
                }
                lo = lo.min(off);
                hi = hi.max(off);
            }
            let want = (ptr as i128 + lo, ptr as i128 + hi + item as i128);
            let (blo, bhi) = a.byte_range().unwrap();
            prop_assert_eq!((blo as i128, bhi as i128), want);
            // The element-stride indexer of the same array gives the same offsets.
            if shape.len() == 2 {
                let ix = a.indexer::<2>().unwrap();
                for linear in 0..size {
                    let off = ix.offset_of(linear) as i128 * item as i128 + ptr as i128;
                    prop_assert!(off >= want.0 && off + (item as i128) <= want.1);
                }
            }
            // Contiguity agrees with the abi crate's definition.
            if shape.len() == 3 {
                let ix = a.indexer::<3>().unwrap();
                prop_assert_eq!(a.is_c_contiguous(), ix.is_c_contiguous());
            }
        }

        /// Building in place (`from_parts_into`, the launch path's) gives exactly what
        /// `from_parts` and `with_version` give — the same descriptor or the same error —
        /// whatever the slot held before (an earlier, larger descriptor included), and an
        /// error leaves the slot empty.
        #[test]
        fn building_in_place_equals_building(
            shape in proptest::collection::vec(0usize..5, 0..5),
            raw_strides in proptest::collection::vec(-6isize..7, 4),
            strided in any::<bool>(),
            ptr in proptest::sample::select(vec![0u64, 0x10_0000, 0x10_0002, 0x10_0003]),
            dtype in proptest::sample::select(DType::ALL.to_vec()),
            version in 0u8..6,
            readonly in any::<bool>(),
            big_shape in any::<bool>(),
        ) {
            let shape: Vec<usize> = if big_shape && !shape.is_empty() {
                // An element count that overflows: the shape error.
                shape.iter().map(|_| usize::MAX / 2).collect()
            } else {
                shape
            };
            let item = dtype.itemsize() as isize;
            let strides: Vec<isize> = raw_strides.iter().cycle().take(shape.len())
                .map(|s| s * item).collect();
            let strides = strided.then_some(strides.as_slice());
            let stream = Some(StreamRef::Legacy);
            let want = ArrayDesc::from_parts(dtype, &shape, strides, ptr, readonly, stream)
                .map(|d| d.with_version(version));
            let earlier = [7usize; 6];
            let mut slot = Some(
                ArrayDesc::from_parts(DType::F64, &earlier, None, 0x20_0000, true, None).unwrap(),
            );
            let got = ArrayDesc::from_parts_into(
                &mut slot, dtype, &shape, strides, ptr, readonly, stream, version,
            )
            .map(|d| *d);
            match (&want, &got) {
                (Ok(w), Ok(g)) => {
                    prop_assert_eq!(w, g);
                    prop_assert_eq!(slot.as_ref(), Some(w));
                }
                (Err(w), Err(g)) => {
                    prop_assert_eq!(w.to_string(), g.to_string());
                    prop_assert!(slot.is_none());
                }
                _ => prop_assert!(false, "from_parts {:?} but in place {:?}", want, got),
            }
        }
    }
}
