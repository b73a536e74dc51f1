"""Type stubs of the compiled extension ``ferrocuda._ferrocuda``."""

import os
from typing import Any, Dict, List, Optional, Tuple, Union, final

import numpy as np
from typing_extensions import CapsuleType, TypeAlias, disjoint_base

__all__ = [
    "CudaError",
    "PerformanceWarning",
    "BuildError",
    "__version__",
    "MAX_NDIM",
    "SYNC_ENV_VAR",
    "driver_available",
    "device_count",
    "validate_interface",
    "normalize_stream",
    "normalize_sync",
    "synchronize",
    "DeviceArray",
    "ForeignArray",
    "as_cuda_array",
    "is_cuda_array",
    "from_cuda_array_interface",
    "Module",
    "Launcher",
    "Kernel",
    "Family",
    "ConfiguredLauncher",
    "BoundLaunch",
    "bundled",
    "load",
    "build",
    "new_crate",
    "_cli",
    "_pending_releases",
    "_describe_generic",
    "_fast_paths",
    "_cupy_stream_source",
    "_torch_read_source",
    "_pooled_events",
    "_bundled_ptx",
    "_bundled_cubin",
    "_module",
    "_launcher",
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
_Dim3: TypeAlias = Union[int, Tuple[int], Tuple[int, int], Tuple[int, int, int]]

class CudaError(RuntimeError):
    """A CUDA driver call failed, or no CUDA driver/device is available."""

    code: Optional[int]

class PerformanceWarning(UserWarning):
    """A launch copied host (NumPy) arrays to the device and back."""

class BuildError(RuntimeError):
    """A kernel crate could not be built (compiler messages, or what to install)."""

def driver_available() -> bool: ...
def device_count() -> int: ...
def validate_interface(obj: Any, name: str = "x") -> Dict[str, Any]: ...
def normalize_stream(stream: _StreamLike) -> Optional[int]: ...
def normalize_sync(sync: _SyncLike = None) -> str: ...
def synchronize(stream: _StreamLike = None, device: int = 0) -> None: ...
def as_cuda_array(obj: Any, sync: bool = True) -> ForeignArray: ...
def is_cuda_array(obj: Any) -> bool: ...
def from_cuda_array_interface(
    desc: Dict[str, Any], owner: Any = None, sync: bool = True
) -> ForeignArray: ...
def bundled() -> Module: ...
def load(path: Union[str, "os.PathLike[str]"], *, arch: str = "sm_80") -> Module: ...
def build(
    path: Union[str, "os.PathLike[str]"],
    *,
    arch: str = "sm_80",
    force: bool = False,
    target_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    fp_contract: str = "off",
) -> str: ...
def new_crate(path: Union[str, "os.PathLike[str]"]) -> str: ...
def _cli(argv: List[str]) -> int: ...
def _pending_releases() -> int: ...
def _describe_generic(obj: Any, name: str = "x") -> Dict[str, Any]: ...
def _fast_paths() -> Tuple[bool, bool]: ...
def _cupy_stream_source() -> str: ...
def _torch_read_source() -> str: ...
def _pooled_events(device: int = 0) -> int: ...
def _bundled_ptx() -> str: ...
def _bundled_cubin(arch: str) -> Optional[bytes]: ...
def _module(manifest: Optional[Union[str, "os.PathLike[str]"]]) -> Module: ...
def _launcher(
    manifest: Optional[Union[str, "os.PathLike[str]"]], name: str, family: bool
) -> Union[Kernel, Family]: ...

@final
class DeviceArray:
    """An owning, C-contiguous N-D array in CUDA device memory, ordered on one stream."""

    @staticmethod
    def empty(
        shape: Union[int, Tuple[int, ...]],
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
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def size(self) -> int: ...
    @property
    def ndim(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def strides(self) -> Tuple[int, ...]: ...
    @property
    def device(self) -> int: ...
    @property
    def stream(self) -> int: ...
    @property
    def ptr(self) -> int: ...
    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> CapsuleType: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __len__(self) -> int: ...

@final
class ForeignArray:
    """Another library's device array, validated, keeping its owner alive."""

    @property
    def owner(self) -> Any: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def strides(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def size(self) -> int: ...
    @property
    def ndim(self) -> int: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def stream(self) -> Optional[int]: ...
    @property
    def ptr(self) -> int: ...
    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...

@final
class ConfiguredLauncher:
    """A kernel or family with a fixed ``[grid, block, stream, shared_mem]``."""

    def __call__(self, *args: Any, sync: _SyncLike = None, check_pointers: bool = True) -> None: ...

@final
class BoundLaunch:
    """A launch whose arguments were read, checked and converted once; call it to launch."""

    def __call__(self, *args: Any, **kwargs: Any) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> Tuple[Any, ...]: ...
    @property
    def sync(self) -> str: ...
    @property
    def device(self) -> int: ...
    @property
    def grid(self) -> Optional[Tuple[int, int, int]]: ...
    @property
    def block(self) -> Optional[Tuple[int, int, int]]: ...

@disjoint_base
class Launcher:
    """Launches kernels: the base of :class:`Kernel` and :class:`Family`."""

    def __call__(
        self,
        *args: Any,
        stream: _StreamLike = None,
        sync: _SyncLike = None,
        grid: Optional[_Dim3] = None,
        block: Optional[_Dim3] = None,
        shared_mem: Optional[int] = None,
        check_pointers: bool = True,
    ) -> None: ...
    def bind(
        self,
        *args: Any,
        stream: _StreamLike = None,
        sync: _SyncLike = None,
        grid: Optional[_Dim3] = None,
        block: Optional[_Dim3] = None,
        shared_mem: Optional[int] = None,
        check_pointers: bool = True,
    ) -> BoundLaunch: ...
    def __getitem__(self, config: Tuple[Any, ...], /) -> ConfiguredLauncher: ...
    @property
    def name(self) -> str: ...
    def __reduce__(self) -> Tuple[Any, Tuple[Optional[str], str, bool]]: ...

@final
class Kernel(Launcher):
    """One kernel of a module."""

    @property
    def family(self) -> str: ...
    @property
    def params(self) -> Tuple[Tuple[str, str, str, int, bool], ...]: ...
    @property
    def signature(self) -> str: ...

@final
class Family(Launcher):
    """A kernel family: dispatches on element types, ranks and layouts."""

    @property
    def kernels(self) -> Tuple[Kernel, ...]: ...

@final
class Module:
    """A PTX module and its manifest; kernels and families are attributes."""

    @staticmethod
    def load(path: Union[str, "os.PathLike[str]"], *, arch: str = "sm_80") -> Module: ...
    @property
    def kernels(self) -> Dict[str, Kernel]: ...
    @property
    def families(self) -> Dict[str, Family]: ...
    @property
    def manifest(self) -> str: ...
    @property
    def arch(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def cubins(self) -> List[str]: ...
    def loaded_image(self, device: int = 0) -> str: ...
    def __reduce__(self) -> Tuple[Any, Tuple[Optional[str]]]: ...
    # Kernels and families are also attributes at run time (``module.add``); PyO3 implements
    # that as a slot stubtest cannot see, so the typed access is ``module.families["add"]``.
