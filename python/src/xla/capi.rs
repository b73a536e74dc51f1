//! The part of XLA's FFI C API (`xla/ffi/api/c_api.h`, shipped with jaxlib under
//! `jax.ffi.include_dir()`) that ferrocuda's handlers use, declared for Rust.
//!
//! No maintained crate declares this API, so the declarations are written here from the
//! header. Every struct XLA passes starts with its `struct_size`; XLA only appends fields (the
//! header's versioning rule), so a handler checks that a struct is *at least* as large as the
//! prefix it reads (`struct_size!` below, the header's `XLA_FFI_STRUCT_SIZE`: the offset of
//! the last field it reads plus that field's size) and refuses smaller ones with an error
//! instead of reading past them.
//!
//! What is used, and its layout, has not changed from API version 0.1 through 0.4 (jaxlib
//! 0.11): the call frame, its arguments, results and attributes, buffers, scalar and string
//! attributes, the metadata extension, and the first five functions of the API table
//! (`XLA_FFI_Error_Create` … `XLA_FFI_Stream_Get`). Later functions moved between minor
//! versions (0.4 inserted `XLA_FFI_ThreadPool_NumThreads` before the futures): they are
//! declared opaque and never called.

use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};

/// The API version whose layouts ferrocuda's handlers rely on, reported to XLA in the
/// metadata query (XLA accepts handlers of any version from 0.1 up to its own).
pub const API_MAJOR: c_int = 0;
/// See [`API_MAJOR`].
pub const API_MINOR: c_int = 1;

/// `XLA_FFI_Extension_Metadata`: the extension type of the metadata query.
pub const EXTENSION_METADATA: c_int = 1;

/// `XLA_FFI_ExecutionStage_EXECUTE`.
pub const STAGE_EXECUTE: c_int = 3;

/// `XLA_FFI_ArgType_BUFFER` / `XLA_FFI_RetType_BUFFER`.
pub const BUFFER: c_int = 1;

/// `XLA_FFI_AttrType_SCALAR`.
pub const ATTR_SCALAR: c_int = 3;
/// `XLA_FFI_AttrType_STRING`.
pub const ATTR_STRING: c_int = 4;

/// `XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE`: calls always launch the same device
/// work (for the same attributes), so XLA may trace them into a CUDA graph and replay it.
pub const TRAITS_COMMAND_BUFFER_COMPATIBLE: u32 = 1;

/// `XLA_FFI_Error_Code_INVALID_ARGUMENT`.
pub const ERR_INVALID_ARGUMENT: c_int = 3;
/// `XLA_FFI_Error_Code_FAILED_PRECONDITION`.
pub const ERR_FAILED_PRECONDITION: c_int = 9;
/// `XLA_FFI_Error_Code_UNIMPLEMENTED`.
pub const ERR_UNIMPLEMENTED: c_int = 12;
/// `XLA_FFI_Error_Code_INTERNAL`.
pub const ERR_INTERNAL: c_int = 13;

/// `XLA_FFI_DataType` values (`xla::PrimitiveType`).
pub mod dtype {
    use std::ffi::c_int;
    pub const PRED: c_int = 1;
    pub const S8: c_int = 2;
    pub const S16: c_int = 3;
    pub const S32: c_int = 4;
    pub const S64: c_int = 5;
    pub const U8: c_int = 6;
    pub const U16: c_int = 7;
    pub const U32: c_int = 8;
    pub const U64: c_int = 9;
    pub const F16: c_int = 10;
    pub const F32: c_int = 11;
    pub const F64: c_int = 12;
    pub const C64: c_int = 15;
    pub const BF16: c_int = 16;
    pub const C128: c_int = 18;
}

/// `XLA_FFI_Error`: opaque, created by XLA (`XLA_FFI_Error_Create`) and owned by whoever it
/// is returned to.
#[repr(C)]
pub struct XlaError {
    _opaque: [u8; 0],
}

/// `XLA_FFI_Extension_Base` (`XLA_FFI_InternalExtension` in 0.4).
#[repr(C)]
pub struct ExtensionBase {
    pub struct_size: usize,
    pub type_: c_int,
    pub next: *mut ExtensionBase,
}

/// `XLA_FFI_Api_Version`.
#[repr(C)]
pub struct ApiVersion {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub major_version: c_int,
    pub minor_version: c_int,
}

/// `XLA_FFI_Error_Create_Args`.
#[repr(C)]
pub struct ErrorCreateArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub message: *const c_char,
    pub errc: c_int,
}

/// `XLA_FFI_Buffer`: a dense row-major array (XLA's default layout for custom calls).
#[repr(C)]
pub struct Buffer {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub dtype: c_int,
    pub data: *mut c_void,
    pub rank: i64,
    pub dims: *mut i64,
}

/// `XLA_FFI_Args`.
#[repr(C)]
pub struct Args {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub size: i64,
    pub types: *mut c_int,
    pub args: *mut *mut c_void,
}

/// `XLA_FFI_Rets`.
#[repr(C)]
pub struct Rets {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub size: i64,
    pub types: *mut c_int,
    pub rets: *mut *mut c_void,
}

/// `XLA_FFI_ByteSpan`: a string attribute or an attribute's name (not NUL-terminated).
#[repr(C)]
pub struct ByteSpan {
    pub ptr: *const c_char,
    pub len: usize,
}

/// `XLA_FFI_Scalar`: a scalar attribute.
#[repr(C)]
pub struct Scalar {
    pub dtype: c_int,
    pub value: *mut c_void,
}

/// `XLA_FFI_Attrs`: sorted by name.
#[repr(C)]
pub struct Attrs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub size: i64,
    pub types: *mut c_int,
    pub names: *mut *mut ByteSpan,
    pub attrs: *mut *mut c_void,
}

/// `XLA_FFI_CallFrame`. Its struct size (the header's `XLA_FFI_CallFrame_STRUCT_SIZE`) ends
/// at `attrs`: `future` is an output the handler may set, and is never read here.
#[repr(C)]
pub struct CallFrame {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub api: *const Api,
    pub ctx: *mut c_void,
    pub stage: c_int,
    pub args: Args,
    pub rets: Rets,
    pub attrs: Attrs,
    pub future: *mut c_void,
}

/// `XLA_FFI_Stream_Get_Args`.
#[repr(C)]
pub struct StreamGetArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub ctx: *mut c_void,
    pub stream: *mut c_void,
}

/// `XLA_FFI_Metadata`. Its struct size ends at `traits` (0.4 appended a state type id).
#[repr(C)]
pub struct Metadata {
    pub struct_size: usize,
    pub api_version: ApiVersion,
    pub traits: u32,
}

/// `XLA_FFI_Metadata_Extension`: what the metadata query's call frame carries.
#[repr(C)]
pub struct MetadataExtension {
    pub extension_base: ExtensionBase,
    pub metadata: *mut Metadata,
}

/// `XLA_FFI_Error_Create`.
pub type ErrorCreateFn = unsafe extern "C" fn(*mut ErrorCreateArgs) -> *mut XlaError;
/// `XLA_FFI_Stream_Get`.
pub type StreamGetFn = unsafe extern "C" fn(*mut StreamGetArgs) -> *mut XlaError;

/// `XLA_FFI_Api`, up to `XLA_FFI_Stream_Get` (the fields after it are never read, and their
/// order changed between minor versions).
#[repr(C)]
pub struct Api {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub api_version: ApiVersion,
    pub internal_api: *const c_void,
    pub error_create: Option<ErrorCreateFn>,
    /// `XLA_FFI_Error_GetMessage` (0.1) / `XLA_FFI_Error_GetDetails` (0.4): not called.
    pub error_get_details: *const c_void,
    /// `XLA_FFI_Error_Destroy`: not called.
    pub error_destroy: *const c_void,
    /// `XLA_FFI_Handler_Register`: not called (JAX registers the handlers).
    pub handler_register: *const c_void,
    pub stream_get: Option<StreamGetFn>,
}

/// `XLA_FFI_Handler`: the signature of a registered handler.
pub type Handler = unsafe extern "C" fn(*mut CallFrame) -> *mut XlaError;

/// `XLA_FFI_STRUCT_SIZE(T, last)`: the bytes of `T` up to and including field `last`.
macro_rules! struct_size {
    ($t:ty, $last:ident) => {
        offset_of!($t, $last) + size_of_field(|s: &$t| &s.$last)
    };
}

/// The size of a field, from an accessor (`size_of_val` without a value).
const fn size_of_field<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// The header's `*_STRUCT_SIZE` of each struct read here.
pub mod sizes {
    use super::*;
    pub const EXTENSION_BASE: usize = struct_size!(ExtensionBase, next);
    pub const API_VERSION: usize = struct_size!(ApiVersion, minor_version);
    pub const ERROR_CREATE_ARGS: usize = struct_size!(ErrorCreateArgs, errc);
    pub const BUFFER: usize = struct_size!(Buffer, dims);
    pub const ARGS: usize = struct_size!(Args, args);
    pub const RETS: usize = struct_size!(Rets, rets);
    pub const ATTRS: usize = struct_size!(Attrs, attrs);
    pub const CALL_FRAME: usize = struct_size!(CallFrame, attrs);
    pub const STREAM_GET_ARGS: usize = struct_size!(StreamGetArgs, stream);
    pub const METADATA: usize = struct_size!(Metadata, traits);
    pub const METADATA_EXTENSION: usize = struct_size!(MetadataExtension, metadata);
    /// What a handler needs of the API table: up to `XLA_FFI_Stream_Get` (the 0.1 header's
    /// `XLA_FFI_Api_STRUCT_SIZE`).
    pub const API_PREFIX: usize = struct_size!(Api, stream_get);
}

/// A struct's name, its size (as the header's `*_STRUCT_SIZE`), and its fields' offsets.
pub type StructLayout = (&'static str, usize, Vec<(&'static str, usize)>);

/// Every struct's size and its fields' offsets, by the header's names: for tests that compare
/// them with the header compiled by a C compiler, or with an independent ctypes declaration.
pub fn layout() -> Vec<StructLayout> {
    macro_rules! layout {
        ($name:literal, $t:ty, $size:expr, [$($f:ident = $cname:literal),* $(,)?]) => {
            ($name, $size, vec![$(($cname, offset_of!($t, $f))),*])
        };
    }
    vec![
        layout!(
            "XLA_FFI_Extension_Base",
            ExtensionBase,
            sizes::EXTENSION_BASE,
            [struct_size = "struct_size", type_ = "type", next = "next"]
        ),
        layout!(
            "XLA_FFI_Api_Version",
            ApiVersion,
            sizes::API_VERSION,
            [
                struct_size = "struct_size",
                extension_start = "extension_start",
                major_version = "major_version",
                minor_version = "minor_version"
            ]
        ),
        layout!(
            "XLA_FFI_Error_Create_Args",
            ErrorCreateArgs,
            sizes::ERROR_CREATE_ARGS,
            [
                struct_size = "struct_size",
                message = "message",
                errc = "errc"
            ]
        ),
        layout!(
            "XLA_FFI_Buffer",
            Buffer,
            sizes::BUFFER,
            [
                struct_size = "struct_size",
                dtype = "dtype",
                data = "data",
                rank = "rank",
                dims = "dims"
            ]
        ),
        layout!(
            "XLA_FFI_Args",
            Args,
            sizes::ARGS,
            [size = "size", types = "types", args = "args"]
        ),
        layout!(
            "XLA_FFI_Rets",
            Rets,
            sizes::RETS,
            [size = "size", types = "types", rets = "rets"]
        ),
        layout!(
            "XLA_FFI_Attrs",
            Attrs,
            sizes::ATTRS,
            [
                size = "size",
                types = "types",
                names = "names",
                attrs = "attrs"
            ]
        ),
        layout!(
            "XLA_FFI_CallFrame",
            CallFrame,
            sizes::CALL_FRAME,
            [
                struct_size = "struct_size",
                extension_start = "extension_start",
                api = "api",
                ctx = "ctx",
                stage = "stage",
                args = "args",
                rets = "rets",
                attrs = "attrs",
                future = "future"
            ]
        ),
        layout!(
            "XLA_FFI_Stream_Get_Args",
            StreamGetArgs,
            sizes::STREAM_GET_ARGS,
            [ctx = "ctx", stream = "stream"]
        ),
        layout!(
            "XLA_FFI_Metadata",
            Metadata,
            sizes::METADATA,
            [
                struct_size = "struct_size",
                api_version = "api_version",
                traits = "traits"
            ]
        ),
        layout!(
            "XLA_FFI_Metadata_Extension",
            MetadataExtension,
            sizes::METADATA_EXTENSION,
            [extension_base = "extension_base", metadata = "metadata"]
        ),
        (
            "XLA_FFI_ByteSpan",
            size_of::<ByteSpan>(),
            vec![
                ("ptr", offset_of!(ByteSpan, ptr)),
                ("len", offset_of!(ByteSpan, len)),
            ],
        ),
        (
            "XLA_FFI_Scalar",
            size_of::<Scalar>(),
            vec![
                ("dtype", offset_of!(Scalar, dtype)),
                ("value", offset_of!(Scalar, value)),
            ],
        ),
        layout!(
            "XLA_FFI_Api",
            Api,
            sizes::API_PREFIX,
            [
                struct_size = "struct_size",
                api_version = "api_version",
                internal_api = "internal_api",
                error_create = "XLA_FFI_Error_Create",
                stream_get = "XLA_FFI_Stream_Get"
            ]
        ),
    ]
}
