"""The cuDNN baseline: every forward algorithm of cuDNN 9's legacy API, called through ctypes.

Why ctypes: CuPy 14 no longer ships cuDNN bindings, and PyTorch picks one algorithm for you. The
study needs each of the eight forward algorithms by itself, in true FP32 (``CUDNN_FMA_MATH``;
the default math type silently allows TF32 on tensor cores), on CuPy's current stream.

The library is found in this order: the ``nvidia.cudnn`` wheel (``nvidia-cudnn-cu12`` or
``-cu13``), the directory in ``$CONVKIT_CUDNN_PATH`` (or ``$CUDNN_PATH``, its ``lib/``), then
the system loader. cuDNN 9 is split into sub-libraries that ``libcudnn.so.9`` opens lazily;
they are loaded first with ``RTLD_GLOBAL`` so that every engine resolves against one copy.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.core.memo import memoize
from convkit.core.problem import ConvProblem
from convkit.cuda.launch import stream_key

#: cudnnConvolutionFwdAlgo_t, in enum order.
FORWARD_ALGORITHMS: tuple[str, ...] = (
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
    "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED",
)  # fmt: skip
#: Each forward algorithm in words, as the book names it (the enum names stay where a paper is quoted).
ALGORITHM_WORDS: dict[str, str] = {
    "IMPLICIT_GEMM": "implicit GEMM", "IMPLICIT_PRECOMP_GEMM": "implicit GEMM, precomputed", "GEMM": "GEMM",
    "DIRECT": "direct", "FFT": "FFT", "FFT_TILING": "FFT, tiled", "WINOGRAD": "Winograd",
    "WINOGRAD_NONFUSED": "Winograd, non-fused",
}  # fmt: skip
#: Algorithms that transform the data (FFT, Winograd): their FP32 error is larger by design.
TRANSFORM_ALGORITHMS = frozenset({"FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"})

#: The workspace limit per algorithm, as in the cuConv paper's evaluation (section 5).
WORKSPACE_LIMIT_BYTES = 1 << 30

# cudnn enums (cudnn_graph.h / cudnn_ops.h / cudnn_cnn.h of cuDNN 9)
_STATUS_SUCCESS = 0
_STATUS_NOT_SUPPORTED = 3000  # 3000..3999: not supported, with sub-codes
_STATUS_ALLOC_FAILED = 4001  # CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED
_TENSOR_NCHW = 0
_DATA_FLOAT = 0
_CROSS_CORRELATION = 1
_FMA_MATH = 3  # cudnnMathType_t CUDNN_FMA_MATH: FP32 FMA only, no tensor cores

_SUBLIBRARIES = (
    "libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
    "libcudnn_heuristic.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9",
)  # fmt: skip


class CudnnError(RuntimeError):
    """A cuDNN call failed; ``status`` is the cudnnStatus_t code."""

    def __init__(self, call: str, status: int, message: str):
        super().__init__(f"{call} failed: {message} (status {status})")
        self.status = status

    @property
    def not_supported(self) -> bool:
        return _STATUS_NOT_SUPPORTED <= self.status < _STATUS_NOT_SUPPORTED + 1000


def _candidate_dirs() -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    try:
        import nvidia.cudnn  # the nvidia-cudnn-cu12 / -cu13 wheel; a namespace package

        for base in list(getattr(nvidia.cudnn, "__path__", [])):
            found.append(("nvidia.cudnn wheel", Path(base) / "lib"))
    except ImportError:
        pass
    for var in ("CONVKIT_CUDNN_PATH", "CUDNN_PATH"):
        if value := os.environ.get(var):
            found.append((f"${var}", Path(value)))
            found.append((f"${var}", Path(value) / "lib"))
    return found


@memoize()
def _library() -> tuple[ctypes.CDLL, str]:
    """Load cuDNN once per process; returns the library and where it came from."""
    for origin, directory in _candidate_dirs():
        main = directory / "libcudnn.so.9"
        if main.is_file():
            for sub in _SUBLIBRARIES:
                if (directory / sub).is_file():
                    ctypes.CDLL(str(directory / sub), mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(str(main), mode=ctypes.RTLD_GLOBAL), f"{origin}: {main}"
    for sub in _SUBLIBRARIES:  # the system loader, e.g. a distribution package
        try:
            ctypes.CDLL(sub, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass
    try:
        return ctypes.CDLL("libcudnn.so.9", mode=ctypes.RTLD_GLOBAL), "system loader: libcudnn.so.9"
    except OSError as exc:
        raise OSError(
            "cuDNN 9 not found: install the nvidia-cudnn-cu12 (or -cu13) wheel, or set "
            "CONVKIT_CUDNN_PATH to the directory holding libcudnn.so.9"
        ) from exc


def library_origin() -> str:
    """Where cuDNN was loaded from (wheel, environment variable or system), or why it was not."""
    try:
        return _library()[1]
    except OSError as exc:
        return f"not found ({exc})"


def version() -> str | None:
    """cuDNN's version as ``major.minor.patch`` (9.19.0), or None if it is not found."""
    try:
        lib = _library()[0]
    except OSError:
        return None
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    v = int(lib.cudnnGetVersion())
    return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"


def _check(call: str, status: int) -> None:
    if status != _STATUS_SUCCESS:
        lib = _library()[0]
        lib.cudnnGetErrorString.restype = ctypes.c_char_p
        raise CudnnError(call, status, lib.cudnnGetErrorString(status).decode())


def _call(name: str, *args: Any) -> None:
    _check(name, getattr(_library()[0], name)(*args))


class _AlgoPerf(ctypes.Structure):
    """cudnnConvolutionFwdAlgoPerf_t (cudnn_cnn.h, cuDNN 9)."""

    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int),
                ("mathType", ctypes.c_int), ("reserved", ctypes.c_int * 3)]  # fmt: skip


#: Held from setting a shared handle's stream to the call enqueued on it: cuDNN handles are not for two threads
#: at once, and another thread's cudnnSetStream in between would move this call to its stream.
_HANDLE_LOCK = threading.Lock()


@memoize()
def _handle(device_id: int) -> ctypes.c_void_p:
    """One cuDNN handle per device for the life of the process (creating one costs milliseconds); calls on it
    hold :data:`_HANDLE_LOCK`."""
    handle = ctypes.c_void_p()
    _call("cudnnCreate", ctypes.byref(handle))
    return handle


@dataclass
class Workspace:
    """A per-algorithm workspace request: bytes needed, or why none could be had."""

    algorithm: str
    bytes: int | None
    status: str  # "ok", "not_supported", "workspace_too_large"
    note: str = ""


class CudnnConvolution:
    """Descriptors for one :class:`ConvProblem`, FP32 NCHW, FMA math; runs any forward algorithm.

    Example:
        >>> conv = CudnnConvolution(ConvProblem.from_label("7-1-1-32-832"))  # doctest: +SKIP
        >>> conv.forward("IMPLICIT_GEMM", x, w, y)                          # doctest: +SKIP
    """

    def __init__(self, problem: ConvProblem):
        from convkit.core.gpu import require_cupy

        self._cupy = require_cupy()
        self.problem = problem
        self.handle = _handle(self._cupy.cuda.Device().id)
        p = problem
        self._x, self._y = ctypes.c_void_p(), ctypes.c_void_p()
        self._w, self._conv = ctypes.c_void_p(), ctypes.c_void_p()
        _call("cudnnCreateTensorDescriptor", ctypes.byref(self._x))
        _call("cudnnCreateTensorDescriptor", ctypes.byref(self._y))
        _call("cudnnCreateFilterDescriptor", ctypes.byref(self._w))
        _call("cudnnCreateConvolutionDescriptor", ctypes.byref(self._conv))
        _call("cudnnSetTensor4dDescriptor", self._x, _TENSOR_NCHW, _DATA_FLOAT, p.n, p.c, p.h, p.w)
        _call("cudnnSetFilter4dDescriptor", self._w, _DATA_FLOAT, _TENSOR_NCHW, p.m, p.c, p.r, p.s)
        _call("cudnnSetConvolution2dDescriptor", self._conv, p.pad, p.pad, p.stride, p.stride,
              1, 1, _CROSS_CORRELATION, _DATA_FLOAT)  # fmt: skip
        _call("cudnnSetConvolutionMathType", self._conv, _FMA_MATH)
        dims = [ctypes.c_int() for _ in range(4)]
        _call("cudnnGetConvolution2dForwardOutputDim", self._conv, self._x, self._w,
              *(ctypes.byref(d) for d in dims))  # fmt: skip
        if tuple(d.value for d in dims) != p.output_shape:
            raise RuntimeError(f"cuDNN's output shape {[d.value for d in dims]} != {p.output_shape}")
        _call("cudnnSetTensor4dDescriptor", self._y, _TENSOR_NCHW, _DATA_FLOAT, *p.output_shape)
        self._workspaces: dict[tuple[str, Any], Any] = {}  # (algorithm, stream_key)

    def __del__(self) -> None:
        try:
            lib = _library()[0]
            lib.cudnnDestroyTensorDescriptor(self._x)
            lib.cudnnDestroyTensorDescriptor(self._y)
            lib.cudnnDestroyFilterDescriptor(self._w)
            lib.cudnnDestroyConvolutionDescriptor(self._conv)
        except Exception:
            pass

    def workspace(self, algorithm: str) -> Workspace:
        """How much workspace ``algorithm`` needs for this problem, or why it cannot run."""
        algo = FORWARD_ALGORITHMS.index(algorithm)
        size = ctypes.c_size_t()
        status = _library()[0].cudnnGetConvolutionForwardWorkspaceSize(
            self.handle, self._x, self._w, self._conv, self._y, algo, ctypes.byref(size)
        )
        if _STATUS_NOT_SUPPORTED <= status < _STATUS_NOT_SUPPORTED + 1000:
            return Workspace(algorithm, None, "not_supported", f"workspace query: status {status}")
        _check("cudnnGetConvolutionForwardWorkspaceSize", status)
        if size.value > WORKSPACE_LIMIT_BYTES:
            return Workspace(algorithm, size.value, "workspace_too_large",
                             f"needs {size.value / 2**20:.0f} MiB > {WORKSPACE_LIMIT_BYTES >> 20} MiB")  # fmt: skip
        return Workspace(algorithm, size.value, "ok")

    def forward(self, algorithm: str, x: Any, w: Any, y: Any) -> None:
        """y = conv(x, w) with one algorithm, on CuPy's current stream (raises CudnnError). The workspace is the
        stream's own (calls on one stream run in order; on two they must not share one)."""
        stream = self._cupy.cuda.get_current_stream().ptr
        key = (algorithm, stream_key(stream))
        ws = self._workspaces.get(key)
        if ws is None:
            need = self.workspace(algorithm)
            if need.status != "ok":
                raise CudnnError("cudnnGetConvolutionForwardWorkspaceSize", _STATUS_NOT_SUPPORTED, need.note)
            ws = self._cupy.empty(max(need.bytes or 0, 1), dtype=self._cupy.uint8)
            self._workspaces[key] = ws
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        with _HANDLE_LOCK:
            _call("cudnnSetStream", self.handle, ctypes.c_void_p(stream))
            _call("cudnnConvolutionForward", self.handle, ctypes.byref(alpha), self._x,
                  ctypes.c_void_p(x.data.ptr), self._w, ctypes.c_void_p(w.data.ptr), self._conv,
                  FORWARD_ALGORITHMS.index(algorithm), ctypes.c_void_p(ws.data.ptr),
                  ctypes.c_size_t(ws.nbytes), ctypes.byref(beta), self._y,
                  ctypes.c_void_p(y.data.ptr))  # fmt: skip

    def heuristic_ranking(self) -> list[tuple[str, str]]:
        """cuDNN's own heuristic order (``cudnnGetConvolutionForwardAlgorithm_v7``): (algorithm, status)."""
        lib = _library()[0]
        count = ctypes.c_int()
        _call("cudnnGetConvolutionForwardAlgorithmMaxCount", self.handle, ctypes.byref(count))
        perfs = (_AlgoPerf * count.value)()  # sized from the library: 10 in cuDNN 9, not 8
        returned = ctypes.c_int()
        _check(
            "cudnnGetConvolutionForwardAlgorithm_v7",
            lib.cudnnGetConvolutionForwardAlgorithm_v7(
                self.handle, self._x, self._w, self._conv, self._y, count.value, ctypes.byref(returned), perfs
            ),
        )
        ranking = []
        for perf in perfs[: returned.value]:
            if 0 <= perf.algo < len(FORWARD_ALGORITHMS):
                ranking.append((FORWARD_ALGORITHMS[perf.algo], "ok" if perf.status == 0 else str(perf.status)))
        return ranking


_ACTIVATION_RELU = 1  # cudnnActivationMode_t
_POOLING_MAX = 0  # cudnnPoolingMode_t CUDNN_POOLING_MAX
_NOT_PROPAGATE_NAN = 0


class CudnnBiasReluPool:
    """The rest of a CNN layer after a convolution, as three cuDNN calls: ``cudnnAddTensor`` (bias),
    ``cudnnActivationForward`` (ReLU, in place) and ``cudnnPoolingForward`` (2x2 max, stride 2).

    Args:
        m: channels; conv_h, conv_w: the convolution output's size (one image).

    Example:
        >>> tail = CudnnBiasReluPool(256, 224, 224)  # doctest: +SKIP
        >>> tail(conv_out, bias, pooled)              # conv_out is overwritten  # doctest: +SKIP
    """

    def __init__(self, m: int, conv_h: int, conv_w: int):
        from convkit.core.gpu import require_cupy

        self._cupy = require_cupy()
        self.handle = _handle(self._cupy.cuda.Device().id)
        self._conv, self._bias, self._pooled = (ctypes.c_void_p() for _ in range(3))
        self._act, self._pool = ctypes.c_void_p(), ctypes.c_void_p()
        for desc in (self._conv, self._bias, self._pooled):
            _call("cudnnCreateTensorDescriptor", ctypes.byref(desc))
        _call("cudnnCreateActivationDescriptor", ctypes.byref(self._act))
        _call("cudnnCreatePoolingDescriptor", ctypes.byref(self._pool))
        _call("cudnnSetTensor4dDescriptor", self._conv, _TENSOR_NCHW, _DATA_FLOAT, 1, m, conv_h, conv_w)
        _call("cudnnSetTensor4dDescriptor", self._bias, _TENSOR_NCHW, _DATA_FLOAT, 1, m, 1, 1)
        _call("cudnnSetActivationDescriptor", self._act, _ACTIVATION_RELU, _NOT_PROPAGATE_NAN, ctypes.c_double(0.0))
        _call("cudnnSetPooling2dDescriptor", self._pool, _POOLING_MAX, _NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2)
        dims = [ctypes.c_int() for _ in range(4)]
        _call("cudnnGetPooling2dForwardOutputDim", self._pool, self._conv, *(ctypes.byref(d) for d in dims))
        self.output_shape = tuple(d.value for d in dims)
        _call("cudnnSetTensor4dDescriptor", self._pooled, _TENSOR_NCHW, _DATA_FLOAT, *self.output_shape)

    def __del__(self) -> None:
        try:
            lib = _library()[0]
            for desc in (self._conv, self._bias, self._pooled):
                lib.cudnnDestroyTensorDescriptor(desc)
            lib.cudnnDestroyActivationDescriptor(self._act)
            lib.cudnnDestroyPoolingDescriptor(self._pool)
        except Exception:
            pass

    def __call__(self, conv: Any, bias: Any, pooled: Any) -> None:
        """pooled = maxpool(relu(conv + bias)) on CuPy's current stream; ``conv`` is overwritten."""
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        conv_ptr = ctypes.c_void_p(conv.data.ptr)
        with _HANDLE_LOCK:
            _call("cudnnSetStream", self.handle, ctypes.c_void_p(self._cupy.cuda.get_current_stream().ptr))
            _call("cudnnAddTensor", self.handle, ctypes.byref(one), self._bias, ctypes.c_void_p(bias.data.ptr),
                  ctypes.byref(one), self._conv, conv_ptr)  # fmt: skip
            _call("cudnnActivationForward", self.handle, self._act, ctypes.byref(one), self._conv, conv_ptr,
                  ctypes.byref(zero), self._conv, conv_ptr)  # fmt: skip
            _call("cudnnPoolingForward", self.handle, self._pool, ctypes.byref(one), self._conv, conv_ptr,
                  ctypes.byref(zero), self._pooled, ctypes.c_void_p(pooled.data.ptr))  # fmt: skip
