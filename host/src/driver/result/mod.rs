//! Thin `Result` wrappers over the CUDA driver: the one module that calls it.
//!
//! Layered as cudarc is: cudarc's `sys` holds the raw bindings; its `result` module wraps most
//! calls in `Result`s, and where it does, the wrappers here use it and only name the call in
//! the error. The few calls cudarc does not wrap (pointer attributes in one call, module
//! loading with a JIT log, the current context's device, raw device-to-host copies) are
//! wrapped here, from `sys`. Every wrapper is as thin as cudarc's: the safe types in the
//! sibling modules ([`Context`](super::Context), [`Stream`](super::Stream),
//! [`Fence`](super::Fence)) uphold the preconditions the `# Safety` sections state.
//!
//! Errors become [`Error`]s that name the call: `"<call> failed: CUDA_ERROR_X (code N): text"`,
//! plus, for errors after which the context is unusable, the last kernel ferrocuda launched on
//! the device ([`set_last_kernel`]).
//!
//! # What lives where
//!
//! Every wrapper called outside its file is re-exported here, so callers name it
//! `result::<call>` wherever it lives:
//!
//! * `base` — errors ([`cuda_error`], [`is_sticky`], the last kernel of each device),
//!   [`init`], and the helpers the wrappers share (naming a call in an error, looking up
//!   whether the driver exports a symbol);
//! * `device` — devices and contexts: count, ordinals, attributes, the primary context, the
//!   calling thread's current context and its device;
//! * `stream` — streams, events and graph capture: create, destroy, synchronize, wait, stream
//!   ids, a stream's capture state, the thread's capture mode;
//! * `pointer` — pointer queries: [`PointerInfo`] from `cuPointerGetAttributes`;
//! * `memory` — memory and copies: free memory, stream-ordered allocation and pools, memset,
//!   host-to-device and device-to-host copies, mapped host memory, tensor maps (TMA
//!   descriptors);
//! * `module` — modules and functions: loading PTX and cubins, globals, functions, their
//!   attributes and occupancy;
//! * `launch` — launches: [`LaunchAttrs`], `cuLaunchKernel`, `cuLaunchKernelEx` and the
//!   cooperative fallback, the cluster occupancy query.

mod base;
mod device;
mod launch;
mod memory;
mod module;
mod pointer;
mod stream;

use base::{check, exported, Named};
pub(crate) use base::{
    cuda_error, current_ordinal, set_last_kernel, FunctionHandle, ModuleHandle, StreamHandle,
};
pub use base::{init, is_sticky, is_sticky_code, last_kernel, MAX_DEVICES};
pub(crate) use device::{
    current_context, device, device_attribute, device_count, primary_context_retain,
    set_current_context,
};
pub use launch::LaunchAttrs;
pub(crate) use launch::{launch_kernel_with, max_active_clusters};
pub(crate) use memory::{
    mem_alloc_async, mem_alloc_from_pool_async, mem_free_async, mem_get_info,
    mem_host_alloc_mapped, mem_pool_create, memcpy_dtoh_async, memcpy_htod_async, memset_d8_async,
    tensor_map_data_type, tensor_map_encode_tiled, tensor_map_swizzle,
};
pub(crate) use module::{
    blocks_per_multiprocessor, function_attribute, module_function, module_global, module_load,
    module_load_cubin, module_unload, potential_block_size, set_function_attribute,
    FunctionAttribute,
};
pub(crate) use pointer::pointer_attributes;
pub use pointer::PointerInfo;
pub(crate) use stream::{
    event_create, event_query, event_record, event_synchronize, exchange_capture_mode, raw_stream,
    stream_capture, stream_create, stream_destroy, stream_id, stream_synchronize,
    stream_wait_event, CAPTURE_MODE_RELAXED,
};
