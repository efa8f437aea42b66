"""The ptxas report parser on real nvcc output, and every kernel compiling for sm_75 and sm_90."""

from __future__ import annotations

import pytest

from convkit.cuda import nvrtc
from convkit.cuda import ptxas as ck
from convkit.families.cuconv.launch import TILES, tile_shape

REAL_SM75_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'conv2d_direct' for 'sm_75'
ptxas info    : Function properties for conv2d_direct
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 60 registers, used 0 barriers, 420 bytes cmem[0]
"""

SYNTHETIC_LOG = """\
ptxas info    : Compiling entry function 'tiled' for 'sm_90'
ptxas info    : Function properties for tiled
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, 4096 bytes smem, 384 bytes cmem[0]
ptxas info    : Compiling entry function 'plain' for 'sm_90'
ptxas info    : Function properties for plain
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
"""

needs_nvcc = pytest.mark.skipif(ck.find_nvcc() is None, reason="nvcc is not on the PATH")


def test_parse_real_log():
    (k,) = ck.parse_ptxas(REAL_SM75_LOG, source="direct")
    assert (k.source, k.kernel, k.arch, k.registers, k.constant_bytes) == ("direct", "conv2d_direct", "sm_75", 60, 420)
    assert (k.stack_frame_bytes, k.spill_store_bytes, k.spill_load_bytes, k.shared_bytes) == (0, 0, 0, 0)


def test_parse_spills_shared_memory_and_several_kernels():
    tiled, plain = ck.parse_ptxas(SYNTHETIC_LOG)
    assert (tiled.kernel, tiled.registers, tiled.shared_bytes, tiled.stack_frame_bytes) == ("tiled", 40, 4096, 8)
    assert (tiled.spill_store_bytes, tiled.spill_load_bytes) == (4, 4)
    assert (plain.kernel, plain.registers, plain.shared_bytes) == ("plain", 12, 0)


def test_kernel_names_are_found_in_sources():
    assert nvrtc.kernel_names(nvrtc.kernel_source("direct").read_text()) == ["conv2d_direct"]
    ceilings = set(nvrtc.kernel_names(nvrtc.kernel_source("ceilings").read_text()))
    assert ceilings == {
        "fma_peak",
        "pointer_chase",
        "clock_rate",
        "launch_floor",
        "tf32_mma_peak",
        "int8_mma_peak",
        "tf32_wgmma_peak",
        "int8_wgmma_peak",
    }


@needs_nvcc
@pytest.mark.parametrize("arch", ck.CHECKED_ARCHS)
@pytest.mark.parametrize("source", ck.all_sources())
def test_every_kernel_compiles_without_spills(source, arch):
    report = {k.kernel: k for k in ck.ptxas_report(source, arch)}
    for name in nvrtc.kernel_names(nvrtc.kernel_source(source).read_text()):
        assert name in report, f"{name} missing from the {arch} report"
        k = report[name]
        assert k.arch == arch and k.registers > 0
        assert k.spill_store_bytes == k.spill_load_bytes == 0, k


@needs_nvcc
@pytest.mark.parametrize("arch", ck.CHECKED_ARCHS)
@pytest.mark.parametrize("tile", list(TILES))
def test_every_tiled_gemm_tile_compiles_without_spills(tile, arch):
    bm, bn, tm, tn, threads = tile_shape(tile)
    macros = {"BM": bm, "BN": bn, "TM": tm, "TN": tn, "BK": TILES[tile][2], "R": 5, "S": 5}
    options = tuple(f"-DCONVKIT_{k}={v}" for k, v in macros.items())
    (k,) = [k for k in ck.ptxas_report("cuconv", arch, options=options) if k.kernel == "tiled_gemm"]
    assert k.spill_store_bytes == k.spill_load_bytes == k.stack_frame_bytes == 0, k
    assert k.registers <= 65536 // threads, k


@needs_nvcc
def test_a_broken_source_raises_with_the_compiler_output(tmp_path, monkeypatch):
    (tmp_path / "broken.cu").write_text('extern "C" __global__ void broken(float* y) { y[0] = undefined_name; }\n')
    for module in (nvrtc, ck):  # where the source is read, and the include path of nvcc
        monkeypatch.setattr(module, "kernels_dir", lambda: tmp_path)
    with pytest.raises(RuntimeError, match="undefined_name"):
        ck.ptxas_report("broken", "sm_90")


def test_headers_are_inlined_with_the_headers_they_include_each_once(tmp_path, monkeypatch):
    """A source's kernels/ headers inlined for NVRTC, theirs too (split_sum.cuh's dependent_launch.cuh), each once
    however many include it."""
    for source in ("implicit_gemm", "wgmma_tf32x3"):
        code = nvrtc.kernel_code(source)
        assert '#include "' not in code and code.count("void wait_for_previous_kernel()") == 1
    (tmp_path / "twice.cu").write_text('#include "split_sum.cuh"\n#include "dependent_launch.cuh"\n')
    for header in ("split_sum.cuh", "dependent_launch.cuh"):
        (tmp_path / header).write_text((nvrtc.kernels_dir() / header).read_text())
    monkeypatch.setattr(nvrtc, "kernels_dir", lambda: tmp_path)
    monkeypatch.setattr(nvrtc, "kernel_source", lambda name: tmp_path / f"{name}.cu")
    assert nvrtc.kernel_code("twice").count("void wait_for_previous_kernel()") == 1


def test_missing_source():
    with pytest.raises(FileNotFoundError, match="no CUDA source"):
        nvrtc.kernel_source("no_such_family")


@needs_nvcc
def test_sass_names_the_tensor_core_instructions(monkeypatch):
    import os
    import shutil

    if not (os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")):
        pytest.skip("cuobjdump is not on the PATH (nor named by CUOBJDUMP)")
    text = ck.sass("implicit_gemm_tf32x3", "sm_90", options=("-DCONVKIT_BM=64", "-DCONVKIT_BN=64"))
    assert "Function : implicit_gemm_tf32x3" in text and "HMMA.1688.F32.TF32" in text


@needs_nvcc
def test_the_3xtf32_loop_issues_its_first_products_before_the_next_slice_s_copies():
    """The mma.sync 3xTF32 kernel's main loop (128x128 tile, 64x32 warps, weights split ahead, sm_90): a slice's first
    k-step of products (48 HMMA) is issued before the next slice's copies, which then run beside them
    (kernels/implicit_gemm_tf32x3.cu); CONVKIT_COPIES_FIRST builds the order before, copies first."""
    import os
    import shutil

    if not (os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")):
        pytest.skip("cuobjdump is not on the PATH (nor named by CUOBJDUMP)")
    options = ("-DCONVKIT_BM=128", "-DCONVKIT_BN=128", "-DCONVKIT_WARP_M=64", "-DCONVKIT_PRESPLIT=1",
               "-DCONVKIT_STAGES=3")  # fmt: skip
    for first, extra in ((False, ()), (True, ("-DCONVKIT_COPIES_FIRST=1",))):
        text = ck.sass("implicit_gemm_tf32x3", "sm_90", options=(*options, *extra))
        _, ops, order = ck.main_loop(text, "implicit_gemm_tf32x3", "HMMA")
        assert ops["HMMA"] == 96 and ops["LDGSTS"] > 0
        assert (order.index("g") < order.index("H")) == first, order
        if not first:  # a k-step's 48 products before the first copy
            assert order[: order.index("g")].count("H") == 48, order


def test_main_loop_reads_the_innermost_loop_of_the_marker_s_instructions():
    """A hand-written listing: two loops, the inner one holding the HMMAs; its length, mix and order."""
    text = """
        Function : k
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDGSTS.E [R2], desc[UR4][R4.64] ;
        /*0020*/                   HMMA.1688.F32.TF32 R8, R12, R14, R8 ;
        /*0030*/              @!P0 BRA 0x10 ;
        /*0040*/                   FADD R8, R8, R9 ;
        /*0050*/                   BRA 0x0 ;
        /*0060*/                   EXIT ;
        """
    length, ops, order = ck.main_loop(text, "k", "HMMA")
    assert (length, ops["HMMA"], ops["LDGSTS"], order) == (3, 1, 1, "gH.")
    with pytest.raises(ValueError, match="no loop with FFMA"):
        ck.main_loop(text, "k", "FFMA")


def test_sass_says_which_tool_is_missing(monkeypatch):
    monkeypatch.delenv("CUOBJDUMP", raising=False)
    monkeypatch.setattr(ck.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="cuobjdump is not on the PATH"):
        ck.sass("direct")


@needs_nvcc
@pytest.mark.parametrize("filter_size", [1, 3, 5, 7])
@pytest.mark.parametrize("knobs", [(), ("-DCONVKIT_STAGED=0",), ("-DCONVKIT_WG_N=256", "-DCONVKIT_STAGED=0"),
                                   ("-DCONVKIT_STAGED=0", "-DCONVKIT_STAGES=3"),
                                   ("-DCONVKIT_WS_IN_FLIGHT=2",),
                                   ("-DCONVKIT_WS_IN_FLIGHT=2", "-DCONVKIT_WS_PERSISTENT=1"),
                                   ("-DCONVKIT_WS_IN_FLIGHT=2", "-DCONVKIT_WS_PERSISTENT=1",
                                    "-DCONVKIT_WS_FILTERS=64"),
                                   ("-DCONVKIT_WS_IN_FLIGHT=2", "-DCONVKIT_WS_PERSISTENT=1",
                                    "-DCONVKIT_WS_INPUTS_FP32=1")])  # fmt: skip
def test_the_wgmma_kernel_is_built_whole_for_sm_90a_without_spills(filter_size, knobs):
    """Its body is Hopper's alone (wgmma needs sm_90a; elsewhere it is empty): built there, it holds its 64 to 128
    accumulators a thread (twice 64 where each K-tile is summed apart), and none of them spills; nor do the
    warp-specialised kernels of the same source (inputs gathered, or split ahead), their consumers' 128 (192 with two
    K-tiles in flight, in registers the producer gives up) under the 168 registers of 384 threads, Winograd's
    products on the split-ahead one among them (built at 128 filters a block alone), the inputs split ahead or as
    they are staged; nor the products' ceiling (scripts/wgmma_probe.py --ceiling). ptxas serialises no wgmma of
    any."""
    options = (f"-DCONVKIT_R={filter_size}", f"-DCONVKIT_S={filter_size}", *knobs)
    built = {k.kernel: k for k in ck.ptxas_report("wgmma_tf32x3", "sm_90a", options=options)}
    winograd = () if "-DCONVKIT_WS_FILTERS=64" in knobs else ("winograd_products_wgmma_tf32x3",)  # (128 alone)
    assert set(built) == {"implicit_gemm_wgmma_tf32x3", "implicit_gemm_wgmma_ws_tf32x3", "split_weights_tiled_tf32x3",
                          "implicit_gemm_wgmma_ws_nhwc_tf32x3", "split_ahead_operands_tf32x3",
                          "wgmma_products_ceiling", *winograd}  # fmt: skip
    assert built["implicit_gemm_wgmma_tf32x3"].registers > 128
    for ws in ("implicit_gemm_wgmma_ws_tf32x3", "implicit_gemm_wgmma_ws_nhwc_tf32x3", *winograd):
        assert 128 < built[ws].registers <= 168
    assert all(k.spill_store_bytes == k.spill_load_bytes == 0 for k in built.values()), built
    assert not any(k.wgmma_serialized for k in built.values()), built


@needs_nvcc
@pytest.mark.parametrize("filter_size", [1, 3])
def test_the_split_ahead_kernel_at_64_pixels_is_built_for_sm_90a_without_spills(filter_size):
    """At 64 pixels a block (ping-pong at 64 filters) the split-ahead kernel's consumers hold 32 accumulators (64 with
    two K-tiles in flight) in m64n64k8 products: built without a spill or a serialised wgmma; the gathering kernel,
    whose producer stages a column of 128 pixels a thread, is not built at all."""
    options = (f"-DCONVKIT_R={filter_size}", f"-DCONVKIT_S={filter_size}", "-DCONVKIT_WS_IN_FLIGHT=2",
               "-DCONVKIT_WS_PERSISTENT=1", "-DCONVKIT_WS_FILTERS=64", "-DCONVKIT_WS_PINGPONG=1",
               "-DCONVKIT_WS_WIDTH=64")  # fmt: skip
    built = {k.kernel: k for k in ck.ptxas_report("wgmma_tf32x3", "sm_90a", options=options)}
    assert "implicit_gemm_wgmma_ws_nhwc_tf32x3" in built and "implicit_gemm_wgmma_ws_tf32x3" not in built
    assert all(k.spill_store_bytes == k.spill_load_bytes == 0 for k in built.values()), built
    assert not any(k.wgmma_serialized for k in built.values()), built


@needs_nvcc
def test_the_wgmma_ceilings_are_built_for_sm_90a_without_spills():
    """The ceilings' TF32 and INT8 wgmma kernels hold their 128 accumulators a thread, spill none, and ptxas
    serialises none of their products (a serialised wgmma would measure the fallback, not the peak)."""
    built = {k.kernel: k for k in ck.ptxas_report("ceilings", "sm_90a")}
    for kernel in ("tf32_wgmma_peak", "int8_wgmma_peak"):
        assert 128 < built[kernel].registers <= 255 and built[kernel].spill_store_bytes == 0, built[kernel]
        assert not built[kernel].wgmma_serialized, built[kernel]


def test_a_serialised_wgmma_is_read_from_ptxas_log():
    log = (
        "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non "
        "wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in "
        "the function 'k2'\n"
        "ptxas info    : Compiling entry function 'k1' for 'sm_90a'\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    : Used 40 registers\n"
        "ptxas info    : Compiling entry function 'k2' for 'sm_90a'\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    : Used 168 registers\n"
    )
    assert [(k.kernel, k.wgmma_serialized) for k in ck.parse_ptxas(log)] == [("k1", False), ("k2", True)]


class _StandInNvrtc:
    """cupy_backends' NVRTC binding, counting the programs it compiles; its PTX and its cubin name the options."""

    class NVRTCError(Exception):
        pass

    def __init__(self):
        self.compiled = 0

    def getVersion(self):
        return (13, 0)

    def createProgram(self, code, name, headers, include_names):
        return {"code": code}

    def compileProgram(self, program, options):
        self.compiled += 1
        program["options"] = options

    def getPTX(self, program):
        return "// ptx for " + " ".join(program["options"])

    def getCUBIN(self, program):
        return b"cubin for " + " ".join(program["options"]).encode()

    def getSupportedArchs(self):
        return [75, 80, 86, 89, 90, 100, 120]

    def getProgramLog(self, program):
        return ""

    def destroyProgram(self, program):
        pass


@pytest.fixture
def stand_in_nvrtc(tmp_path, monkeypatch) -> _StandInNvrtc:
    import sys
    import types

    stand_in = _StandInNvrtc()
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.nvrtc", stand_in)
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.nvrtc = stand_in
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs", libs)
    monkeypatch.setattr(nvrtc, "_cuda_include_options", lambda: [])
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "cache"))
    return stand_in


def test_a_build_is_kept_between_processes(stand_in_nvrtc, tmp_path, monkeypatch):
    """A build is made once per machine: kept in CuPy's kernel cache folder under what it is built from, read back by
    a later process (here: a second call), built again for other options, and still handed back where the cache
    cannot be written. PTX for a virtual architecture (wgmma's compute_90a), a cubin for a real one."""
    first = nvrtc._cached_build("code", ("-DX=1",), "compute_90a")
    assert stand_in_nvrtc.compiled == 1 and b"-DX=1" in first and b"compute_90a" in first
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".ptx"]
    assert nvrtc._cached_build("code", ("-DX=1",), "compute_90a") == first and stand_in_nvrtc.compiled == 1
    assert nvrtc._cached_build("code", ("-DX=2",), "compute_90a") != first and stand_in_nvrtc.compiled == 2
    cubin = nvrtc._cached_build("code", ("-DX=1",), "sm_90")
    assert cubin.startswith(b"cubin for") and b"sm_90" in cubin and stand_in_nvrtc.compiled == 3
    assert sorted(p.suffix for p in (tmp_path / "cache").iterdir()) == [".cubin", ".ptx", ".ptx"]
    (tmp_path / "blocked").write_text("a file where the cache folder would be")
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "blocked"))
    assert nvrtc._cached_build("code", ("-DX=1",), "compute_90a") == first and stand_in_nvrtc.compiled == 4


def test_every_build_keeps_subnormals(stand_in_nvrtc):
    """No build flushes subnormal values to zero (CuPy's RawModule would: it appends -ftz=true to every build)."""
    for arch in ("sm_90", "compute_75", "compute_90a"):
        assert b"--ftz=false" in nvrtc._cached_build("code", (), arch)
    assert not any("ftz=true" in option for option in nvrtc.COMMON_OPTIONS)


def test_a_gpu_newer_than_nvrtc_gets_ptx_of_the_newest_architecture_nvrtc_knows(stand_in_nvrtc):
    assert nvrtc._buildable("sm_90") == "sm_90" and nvrtc._buildable("compute_75") == "compute_75"
    assert nvrtc._buildable("sm_110") == "compute_100"


@needs_nvcc
def test_the_chapters_compiler_report_shows_wgmma_serialisation_only_where_it_happened():
    from convkit.book.chapter import compiler_report

    report = compiler_report("toy_cnn")
    assert "wgmma_serialized" not in report.columns and {"registers", "spill_store_bytes"} <= set(report.columns)
