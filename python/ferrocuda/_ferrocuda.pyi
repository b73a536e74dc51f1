"""Type stubs of the compiled extension ``ferrocuda._ferrocuda``."""

import os
from collections.abc import Callable
from typing import Any, TypeAlias, final

import numpy as np
from typing_extensions import CapsuleType, disjoint_base

__all__ = [
    "MAX_NDIM",
    "SYNC_ENV_VAR",
    "BoundLaunch",
    "BuildError",
    "CompileError",
    "ConfiguredLauncher",
    "CudaError",
    "DeviceArray",
    "Family",
    "ForeignArray",
    "Kernel",
    "Launcher",
    "Module",
    "OpKernel",
    "PerformanceWarning",
    "Trap",
    "__version__",
    "_bundled_cubin",
    "_bundled_part_file",
    "_bundled_ptx",
    "_cli",
    "_cupy_stream_source",
    "_describe_generic",
    "_env_value",
    "_env_vars",
    "_fast_paths",
    "_home_dir",
    "_inline_cache_dir",
    "_launcher",
    "_module",
    "_pending_releases",
    "_pooled_events",
    "_torch_read_source",
    "_xla_api_version",
    "_xla_capsule",
    "_xla_handler",
    "_xla_layout",
    "_xla_register",
    "as_cuda_array",
    "build",
    "bundled",
    "device_count",
    "device_properties",
    "driver_available",
    "from_cuda_array_interface",
    "inline",
    "is_cuda_array",
    "last_trap",
    "load",
    "new_crate",
    "normalize_stream",
    "normalize_sync",
    "synchronize",
    "validate_interface",
]

__version__: str
MAX_NDIM: int
SYNC_ENV_VAR: str

#: A ``stream=`` argument: ``None``, a CAI integer (1 legacy, 2 per-thread, else a handle;
#: 0 is refused), or a CuPy / PyTorch / Numba / ``__cuda_stream__`` stream object.
_StreamLike: TypeAlias = Any
#: A ``sync=`` argument: ``None`` (process default), ``True``/``'default'``, ``'event'``,
#: ``False``/``'off'`` (or a :class:`ferrocuda.SyncMode`).
_SyncLike: TypeAlias = Any
#: ``grid=`` / ``block=``: an int or a tuple of one to three ints.
_Dim3: TypeAlias = int | tuple[int] | tuple[int, int] | tuple[int, int, int]

class CudaError(RuntimeError):
    """A CUDA driver call failed, or no CUDA driver/device is available."""

    code: int | None
    #: The failed device check a ferrocuda kernel recorded, when the error ended the context.
    trap: Trap | None

@final
class Trap:
    """Where a ferrocuda kernel stopped: a failed device check recorded before the trap."""

    @property
    def device(self) -> int: ...
    @property
    def kernel(self) -> str | None: ...
    @property
    def file(self) -> str: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def line(self) -> int: ...
    @property
    def column(self) -> int: ...
    @property
    def block(self) -> tuple[int, int, int]: ...
    @property
    def thread(self) -> tuple[int, int, int]: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def last_trap(device: int | None = None) -> Trap | None: ...

class PerformanceWarning(UserWarning):
    """A launch copied host (NumPy) arrays to the device and back."""

class BuildError(RuntimeError):
    """A kernel crate could not be built (compiler messages, or what to install)."""

class CompileError(BuildError):
    """An inline kernel's source did not compile (messages name the string ``<inline>``)."""

    #: ``(line, column)`` of each location in the messages (line 1 = the string's first line).
    locations: list[tuple[int, int]]

#: ``progress=``: ``None``/``True`` (to ``sys.stderr``), ``False`` (quiet), or a callable that
#: takes each line.
_Progress: TypeAlias = bool | Callable[[str], object] | None

def driver_available() -> bool: ...
def device_count() -> int: ...
def device_properties(device: int = 0) -> dict[str, Any]: ...
def _home_dir() -> str | os.PathLike[str]: ...
def _env_vars() -> list[tuple[str, str, str, str, str, str]]: ...
def _env_value(name: str) -> bool | str | os.PathLike[str] | list[str] | int | None: ...
def validate_interface(obj: Any, name: str = "x") -> dict[str, Any]: ...
def normalize_stream(stream: _StreamLike) -> int | None: ...
def normalize_sync(sync: _SyncLike = None) -> str: ...
def synchronize(stream: _StreamLike = None, device: int = 0) -> None: ...
def as_cuda_array(obj: Any, sync: bool = True) -> ForeignArray: ...
def is_cuda_array(obj: Any) -> bool: ...
def from_cuda_array_interface(
    desc: dict[str, Any], owner: Any = None, sync: bool = True
) -> ForeignArray: ...
def bundled() -> Module: ...
def load(path: str | os.PathLike[str], *, arch: str = "sm_80") -> Module: ...
def build(
    path: str | os.PathLike[str],
    *,
    arch: str = "sm_80",
    force: bool = False,
    target_dir: str | os.PathLike[str] | None = None,
    fp_contract: str = "off",
    progress: _Progress = None,
) -> str: ...
def inline(
    source: str,
    *,
    arch: str = "sm_80",
    fp_contract: str = "off",
    force: bool = False,
    progress: _Progress = None,
) -> Module: ...
def _inline_cache_dir() -> str: ...
def new_crate(path: str | os.PathLike[str]) -> str: ...
def _cli(argv: list[str]) -> int: ...
def _pending_releases() -> int: ...
def _describe_generic(obj: Any, name: str = "x") -> dict[str, Any]: ...
def _fast_paths() -> tuple[bool, bool]: ...
def _cupy_stream_source() -> str: ...
def _torch_read_source() -> str: ...
def _pooled_events(device: int = 0) -> int: ...
def _bundled_ptx() -> str: ...
def _xla_handler(graph: bool) -> int: ...
def _xla_capsule(graph: bool) -> CapsuleType: ...
def _xla_register(module: Module) -> int: ...
def _xla_layout() -> list[tuple[str, int, list[tuple[str, int]]]]: ...
def _xla_api_version() -> tuple[int, int]: ...
def _bundled_cubin(arch: str) -> bytes | None: ...
def _bundled_part_file(name: str) -> bytes | None: ...
def _module(manifest: str | os.PathLike[str] | None) -> Module: ...
def _launcher(
    manifest: str | os.PathLike[str] | None, name: str, family: bool
) -> Kernel | Family: ...

@final
class DeviceArray:
    """An owning, C-contiguous N-D array in CUDA device memory, ordered on one stream."""

    @staticmethod
    def empty(
        shape: int | tuple[int, ...],
        dtype: Any = None,
        device: int = 0,
        stream: _StreamLike = None,
    ) -> DeviceArray: ...
    @staticmethod
    def from_numpy(array: Any, device: int = 0, stream: _StreamLike = None) -> DeviceArray: ...
    def to_numpy(self) -> np.ndarray[Any, Any]: ...
    def copy_to_host(self) -> np.ndarray[Any, Any]: ...
    def synchronize(self) -> None: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def size(self) -> int: ...
    @property
    def ndim(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def strides(self) -> tuple[int, ...]: ...
    @property
    def device(self) -> int: ...
    @property
    def stream(self) -> int: ...
    @property
    def ptr(self) -> int: ...
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __len__(self) -> int: ...

@final
class ForeignArray:
    """Another library's device array, validated, keeping its owner alive."""

    @property
    def owner(self) -> Any: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def strides(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def size(self) -> int: ...
    @property
    def ndim(self) -> int: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def stream(self) -> int | None: ...
    @property
    def ptr(self) -> int: ...
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...

@final
class ConfiguredLauncher:
    """A kernel or family with a fixed ``[grid, block, stream, shared_mem]``."""

    def __call__(
        self, *args: Any, sync: _SyncLike = None, check_pointers: bool = True, **kwargs: Any
    ) -> None: ...

@final
class BoundLaunch:
    """A launch whose arguments were read, checked and converted once; call it to launch."""

    def __call__(self, *args: Any, **kwargs: Any) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> tuple[Any, ...]: ...
    @property
    def sync(self) -> str: ...
    @property
    def device(self) -> int: ...
    @property
    def grid(self) -> tuple[int, int, int] | None: ...
    @property
    def block(self) -> tuple[int, int, int] | None: ...
    @property
    def stream(self) -> int: ...

@disjoint_base
class Launcher:
    """Launches kernels: the base of :class:`Kernel` and :class:`Family`."""

    def __call__(
        self,
        *args: Any,
        stream: _StreamLike = None,
        sync: _SyncLike = None,
        grid: _Dim3 | None = None,
        block: _Dim3 | None = None,
        shared_mem: int | None = None,
        check_pointers: bool = True,
        **kwargs: Any,
    ) -> None: ...
    def bind(
        self,
        *args: Any,
        stream: _StreamLike = None,
        sync: _SyncLike = None,
        grid: _Dim3 | None = None,
        block: _Dim3 | None = None,
        shared_mem: int | None = None,
        check_pointers: bool = True,
        **kwargs: Any,
    ) -> BoundLaunch: ...
    def __getitem__(self, config: tuple[Any, ...], /) -> ConfiguredLauncher: ...
    def op_kernel(self, op: str) -> OpKernel: ...
    @property
    def name(self) -> str: ...
    def __reduce__(self) -> tuple[Any, tuple[str | None, str, bool]]: ...

@final
class OpKernel:
    """A torch operator's kernel: the launcher's arguments by position, ``sync="off"``; CUDA
    tensors only, tensors that require grad read as their ``detach()``."""

    def __call__(self, *args: Any) -> None: ...
    @property
    def op(self) -> str: ...
    @property
    def launcher(self) -> Launcher: ...
    @launcher.setter
    def launcher(self, launcher: Launcher) -> None: ...

@final
class Kernel(Launcher):
    """One kernel of a module."""

    @property
    def family(self) -> str: ...
    @property
    def params(self) -> tuple[tuple[str, str, str, int, bool], ...]: ...
    @property
    def signature(self) -> str: ...

@final
class Family(Launcher):
    """A kernel family: dispatches on element types, ranks and layouts."""

    @property
    def kernels(self) -> tuple[Kernel, ...]: ...

@final
class Module:
    """A PTX module and its manifest; kernels and families are attributes."""

    @staticmethod
    def load(path: str | os.PathLike[str], *, arch: str = "sm_80") -> Module: ...
    @property
    def kernels(self) -> dict[str, Kernel]: ...
    @property
    def families(self) -> dict[str, Family]: ...
    @property
    def manifest(self) -> str: ...
    @property
    def arch(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def cubins(self) -> list[str]: ...
    def loaded_image(self, device: int = 0) -> str: ...
    def __reduce__(self) -> tuple[Any, tuple[str | None]]: ...
    # Kernels and families are also attributes at run time (``module.add``); PyO3 implements
    # that as a slot stubtest cannot see, so the typed access is ``module.families["add"]``.
