// Chang, Onishi, Maruyama, "Fast convolution kernels on Pascal GPU with high memory efficiency"
// (arXiv 2212.00404; GTX 1080 Ti, CUDA 8.0), and the study's steps past it on the H100.
//
//   out[m][y][x] = sum_{c,r,s} w[m][c][r][s] * in[c][y + r - pad][x + s - pad],  pad = (K - 1) / 2
//
// One image, NCHW float32, "same" padding, stride 1, K in {1, 3, 5}, FP32 FMA accumulation.
//
// chang_single (section 3.1, C = 1): executes a plan of convkit.families.chang2022.single.plan_single. A block owns
//   a band of output rows and a group of filters, cut into pieces of piece_rows x piece_filters; each
//   piece's input rows (plus the K - 1 halo rows) and filters are staged in shared memory, and the
//   next piece is prefetched (cp.async double buffer) while the current one is computed. The
//   paper's S divides the map (method 1: filters per SM, rows in S pieces); its T divides the
//   filters (method 2: rows per SM, filters in T pieces). Each thread computes 8 filters x 4
//   adjacent pixels at a time and loops over its share of the piece, so the piece's size is bounded
//   by shared memory, not by registers (the paper keeps a piece's outputs in registers).
//
// chang_single_direct (past the paper, C = 1): CSD_ROWS x 4 pixels x CSD_FILTERS filters per thread from the
//   input read straight into registers, no staging of the input; the weights from global memory or, copied
//   once per block, from shared memory.
//
// chang_multi (section 3.2, the stride-fixed block): per stage a block stages a segment of CM_CK
//   channels of each of its CM_BM filters (CM_CK * K * K contiguous floats per filter, at a fixed
//   stride C * K * K apart: 32 * K * K bytes for 8 channels, the paper's 32-byte segment at 1x1)
//   and the matching input lines of its pixels, double-buffered: the next segment is fetched while
//   the current one is computed (cp.async: the copies stay in flight during the FMAs, as the
//   paper's register prefetch did on Pascal, which has no cp.async; a register-staged version
//   spilled 1.3 KB at 5x5 on sm_90 and was dropped). Each thread moves its window's pixels from
//   shared memory to registers once per filter row and applies them to 8 filters.
//     The paper's launch (variant chang_multi): 4-byte copies, one pixel per thread (CM_PX 1) on a
//       line of P_x = CM_TILE_W pixels, N_f = CM_BM filters from the FMA requirement, no split.
//     Past the paper (chang_multi_async): 16-byte copies of input rows where the width allows
//       (rows16), 2-D tiles of CM_RPT x CM_PX pixels per thread, and a split of the channels over
//       blocks (blockIdx.z) for maps too small to fill 132 SMs, summed with atomics in one launch
//       (split::zero_tile_once: the first split to start zeroes the tile; the paper rejects the split,
//       Figure 2(b); next to an idle GPU it is cheap).
//
// chang_pointwise (past the paper, 1x1): the stride-fixed block as a GEMM tile over the flattened pixels.
// chang_broadcast (past the paper, 3x3 and 5x5): a filter's outputs on a 7-wide tile of 7, 4, 2 or 1 rows
//   per thread, the input broadcast to a warp's 32 filters, the weights copied in global order with
//   16-byte copies; the sums leave through shared memory so that a warp's stores are contiguous.
//
// Not reproduced: the paper's sources (not published) and its S_B / P_x values (lost from the text).

#include <cuda_runtime.h>

#include "staging.cuh"

extern __shared__ __align__(16) float dynamic_smem[];

// Float4 stores need it: a caller's `out` may be a view at any float offset.
__device__ __forceinline__ bool aligned16(const float* p) { return (reinterpret_cast<size_t>(p) & 15) == 0; }

// Write a thread's kN adjacent outputs of one row, `valid` of them inside it, or add them (`atomic`,
// a channel split): one float4 store (or, on sm_90, one float4 atomicAdd) where `vector` (the
// strip is 16-byte aligned) and all four are inside, else scalar stores or atomicAdds.
template <int kN>
__device__ __forceinline__ void store_strip(float* dst, const float (&vals)[kN], int valid, bool vector, bool atomic)
{
    if constexpr (kN == 4) {
        if (vector && valid >= 4) {
            const float4 v = make_float4(vals[0], vals[1], vals[2], vals[3]);
            if (!atomic) {
                *reinterpret_cast<float4*>(dst) = v;
                return;
            }
#if __CUDA_ARCH__ >= 900
            atomicAdd(reinterpret_cast<float4*>(dst), v);
            return;
#endif
        }
    }
#pragma unroll
    for (int i = 0; i < kN; ++i) {
        if (i >= valid) break;
        if (atomic) atomicAdd(dst + i, vals[i]);
        else dst[i] = vals[i];
    }
}

// ---------------------------------------------------------------------------------------------
// Channel splits in one launch (past the paper)
// ---------------------------------------------------------------------------------------------
//
// The splits of one output tile sum into it without a zeroing kernel first (a second launch costs
// about 2.3 us on the H100, up to a third of a 7x7 layer's time): the first split of a tile to start
// zeroes it, while its first segment's copies are in flight, and raises a flag; every split adds its
// sums with atomics once the flag is up (by then it nearly always is). The last split to finish
// zeroes the tile's three counters (started, zeroed, finished), so they are zero between launches.
// No deadlock: a split only waits for one that has started. (Letting the first split to finish store
// and the others wait for that store was 3-10% slower on 7x7 maps: their splits finish together.)
namespace split {

// Splits that get channels (the launcher rounds the channels per split up to whole segments).
__device__ __forceinline__ int count(int C, int split_channels) { return (C + split_channels - 1) / split_channels; }

// Every block of a split launch, at its start: the tile's first block to start runs `zero_tile` (all
// its threads) and publishes the zeros.
template <class ZeroTile>
__device__ __forceinline__ void zero_tile_once(int* counters, ZeroTile zero_tile)
{
    __shared__ int is_first;
    if (threadIdx.x == 0) is_first = atomicAdd(counters, 1) == 0;
    __syncthreads();
    if (!is_first) return;  // block-uniform
    zero_tile();
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) atomicExch(counters + 1, 1);
}

// Every split, before its atomics: wait for the tile's zeros.
__device__ __forceinline__ void await_zeroed(const int* counters)
{
    if (threadIdx.x == 0) {
        while (*reinterpret_cast<const volatile int*>(counters + 1) == 0) __nanosleep(32);
        __threadfence();
    }
    __syncthreads();
}

// After the block's atomics are issued (not completed: nothing reads them before the launch ends):
// the last of the `splits` to get here, when every split is past await_zeroed, resets the counters.
__device__ __forceinline__ void finish(int* counters, int splits)
{
    if (threadIdx.x == 0 && atomicAdd(counters + 2, 1) == splits - 1) {
        counters[0] = 0;
        counters[1] = 0;
        counters[2] = 0;
    }
}

}  // namespace split

// ---------------------------------------------------------------------------------------------
// Single channel (section 3.1)
// ---------------------------------------------------------------------------------------------

#ifndef CS_K
#define CS_K 3  // filter size
#endif
#ifndef CS_THREADS
#define CS_THREADS 256  // threads per block (the paper: 512; 256 keeps 95 registers, no spills)
#endif
#ifndef CS_MIN_BLOCKS
#define CS_MIN_BLOCKS 2
#endif

namespace single {
constexpr int kK = CS_K, kPad = (CS_K - 1) / 2, kTaps = kK * kK;
constexpr int kFilters = 8;  // per thread: two float4 weight reads per tap
constexpr int kPixels = 4;   // per thread, adjacent in a row: one float4 store per filter
constexpr int kThreads = CS_THREADS;
static_assert(kK % 2 == 1 && kK <= 5, "K must be 1, 3 or 5: a thread reads 8 staged columns per row");

// Staged input row stride: the thread of pixels 4q..4q+3 reads columns 4q..4q+7, and
// 4 * quads + 4 >= W + K - 1 for K <= 5.
__device__ __forceinline__ int in_stride(int W) { return 4 * ((W + 3) / 4) + 4; }

struct Piece {
    int row0, rows, f0, filters;
};

// Stage a piece: input rows row0 - pad .. row0 + rows + pad - 1 (zero outside the map; staged
// column j is input column j - pad) and the piece's filters as [tap][g], g padded to g_stride.
__device__ __forceinline__ void load_piece(
    float* stage, const float* __restrict__ x, const float* __restrict__ w, const Piece& p, int H, int W,
    int g_stride)
{
    const int stride = in_stride(W);
    const int in_floats = (p.rows + kK - 1) * stride;
    for (int i = threadIdx.x; i < in_floats; i += kThreads) {
        const int gy = p.row0 - kPad + i / stride, gx = i % stride - kPad;
        const bool valid = gy >= 0 && gy < H && gx >= 0 && gx < W;
        copy4(stage + i, valid ? x + (long long)gy * W + gx : x, valid);
    }
    float* wt = stage + in_floats;
    for (int i = threadIdx.x; i < kTaps * g_stride; i += kThreads) {
        const int g = i % g_stride, tap = i / g_stride;
        const bool valid = g < p.filters;
        copy4(wt + i, valid ? w + (long long)(p.f0 + g) * kTaps + tap : w, valid);
    }
}

__device__ __forceinline__ void compute_piece(
    const float* stage, float* __restrict__ out, const Piece& p, int H, int W, int g_stride)
{
    const int stride = in_stride(W), quads = (W + 3) / 4;
    const float* wt = stage + (p.rows + kK - 1) * stride;
    const int groups = (p.filters + kFilters - 1) / kFilters;
    const int units = groups * p.rows * quads;
    const bool vector_store = W % 4 == 0 && aligned16(out);
    for (int u = threadIdx.x; u < units; u += kThreads) {
        const int q = u % quads, r = (u / quads) % p.rows, fg = u / (quads * p.rows);
        float acc[kFilters][kPixels];
#pragma unroll
        for (int f = 0; f < kFilters; ++f)
#pragma unroll
            for (int i = 0; i < kPixels; ++i) acc[f][i] = 0.0f;
#pragma unroll
        for (int kh = 0; kh < kK; ++kh) {
            const float* src = stage + (r + kh) * stride + 4 * q;
            float v[8];
            const float4 a = *reinterpret_cast<const float4*>(src);
            v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
            if constexpr (kK > 1) {
                const float4 b = *reinterpret_cast<const float4*>(src + 4);
                v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
            }
#pragma unroll
            for (int kw = 0; kw < kK; ++kw) {
                const float* wk = wt + (kh * kK + kw) * g_stride + fg * kFilters;
                const float4 wa = *reinterpret_cast<const float4*>(wk);
                const float4 wb = *reinterpret_cast<const float4*>(wk + 4);
                const float wv[kFilters] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
                for (int f = 0; f < kFilters; ++f)
#pragma unroll
                    for (int i = 0; i < kPixels; ++i) acc[f][i] = fmaf(wv[f], v[i + kw], acc[f][i]);
            }
        }
        const int y = p.row0 + r, x0 = 4 * q;
#pragma unroll
        for (int f = 0; f < kFilters; ++f) {
            const int g = fg * kFilters + f;
            if (g >= p.filters) break;
            float* dst = out + ((long long)(p.f0 + g) * H + y) * W + x0;
            store_strip(dst, acc[f], W - x0, vector_store, false);
        }
    }
}

}  // namespace single

// Block b owns rows [band * band_rows, +band_rows) x filters [group * group_filters, +group_filters)
// with band = b % bands, group = b / bands, in pieces of piece_rows x piece_filters (filters
// fastest). Dynamic shared memory: two stages of (piece_rows + K - 1) * in_stride(W) + K*K * g_stride
// floats, g_stride = piece_filters rounded up to 8.
extern "C" __global__ void __launch_bounds__(CS_THREADS, CS_MIN_BLOCKS) chang_single(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int H, int W, int M,
    int band_rows, int bands, int group_filters, int piece_rows, int piece_filters)
{
    using namespace single;
    const int band = blockIdx.x % bands, group = blockIdx.x / bands;
    const int r_lo = band * band_rows, r_hi = min(H, r_lo + band_rows);
    const int f_lo = group * group_filters, f_hi = min(M, f_lo + group_filters);
    if (r_lo >= r_hi || f_lo >= f_hi) return;  // uniform over the block
    const int g_stride = (piece_filters + kFilters - 1) / kFilters * kFilters;
    const int stage_floats = (piece_rows + kK - 1) * in_stride(W) + kTaps * g_stride;
    const int filter_pieces = (f_hi - f_lo + piece_filters - 1) / piece_filters;
    const int pieces = (r_hi - r_lo + piece_rows - 1) / piece_rows * filter_pieces;
    auto piece = [&](int i) {
        const int row0 = r_lo + (i / filter_pieces) * piece_rows, f0 = f_lo + (i % filter_pieces) * piece_filters;
        return Piece{row0, min(piece_rows, r_hi - row0), f0, min(piece_filters, f_hi - f0)};
    };

    const auto load = [&](float* buffer, int i) { load_piece(buffer, x, w, piece(i), H, W, g_stride); };
    load(dynamic_smem, 0);
    commit();
    double_buffered(dynamic_smem, stage_floats, pieces, load,
                    [&](const float* buffer, int i) { compute_piece(buffer, out, piece(i), H, W, g_stride); });
}

// chang_single_direct (past the paper): no staging of the input. A thread reads the input its CSD_ROWS x 4
// adjacent outputs need straight from global memory (through L1: neighbouring threads share the halo) into
// registers, then writes them for CSD_FILTERS consecutive filters. No copy to shared memory and no wait for
// it, so a launch-bound layer's chain is one round of loads and the stores (chang_single's copy, wait and
// barrier cost about 1 us on a 28x28 map on the H100). At 1x1, where a pixel is used once, the map is passed
// flattened (rows 1, width H * W) and read with 16-byte loads where aligned.
// The weights are block-uniform: read from global memory (one load per tap, through L1), or, with
// CSD_SHARED_WEIGHTS, copied once per block to shared memory, each filter's taps padded to a multiple of 4
// floats, and read with 16-byte loads: 7 loads for a 5x5 filter's 25 FMAs x 4 x CSD_ROWS instead of 25
// (on a 512x512 5x5 layer on the H100 that was 25-35% faster; on 28x28 maps the barrier costs 0.1-0.2 us).
// Grid: x over the (CSD_ROWS x 4)-pixel tiles of the rows, y over groups of CSD_FILTERS filters.
#ifndef CSD_K
#define CSD_K 1
#endif
#ifndef CSD_FILTERS
#define CSD_FILTERS 4
#endif
#ifndef CSD_ROWS
#define CSD_ROWS 1
#endif
#ifndef CSD_SHARED_WEIGHTS
#define CSD_SHARED_WEIGHTS 0
#endif

extern "C" __global__ void chang_single_direct(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int rows, int width, int M)
{
    constexpr int kK = CSD_K, kPad = (CSD_K - 1) / 2, kF = CSD_FILTERS, kR = CSD_ROWS, kCols = 4 + kK - 1;
    constexpr int kTaps = kK * kK, kTapStride = (kTaps + 3) / 4 * 4;  // a filter's taps in shared memory
    constexpr bool kSharedWeights = CSD_SHARED_WEIGHTS;
    static_assert(kK % 2 == 1 && kK <= 5, "K must be 1, 3 or 5");
    static_assert(kR == 1 || kR == 2 || kR == 4, "CSD_ROWS must be 1, 2 or 4");
    const int quads = (width + 3) / 4, t = blockIdx.x * blockDim.x + threadIdx.x;
    const int y0 = kR * (t / quads), x0 = 4 * (t % quads), f0 = blockIdx.y * kF;
    const bool live = y0 < rows;
    if constexpr (!kSharedWeights) {
        if (!live) return;
    }
    [[maybe_unused]] __shared__ float4 taps[kSharedWeights ? kF * kTapStride / 4 : 1];  // float4: 16-byte reads
    if constexpr (kSharedWeights) {
        float* const copy = reinterpret_cast<float*>(taps);
        for (int i = threadIdx.x; i < kF * kTaps; i += blockDim.x)
            copy[i / kTaps * kTapStride + i % kTaps] = f0 + i / kTaps < M ? w[(long long)f0 * kTaps + i] : 0.0f;
    }
    const int valid = min(4, width - x0);
    float v[kR + kK - 1][kCols];  // the input window: rows y0 - pad .., columns x0 - pad ..
#pragma unroll
    for (int kh = 0; kh < kR + kK - 1; ++kh) {
        const int gy = y0 + kh - kPad;
        const float* row = x + (long long)gy * width;
        if (kK == 1 && valid == 4 && aligned16(row + x0)) {
            const float4 a = *reinterpret_cast<const float4*>(row + x0);
            v[kh][0] = a.x; v[kh][1] = a.y; v[kh][2] = a.z; v[kh][3] = a.w;
            continue;
        }
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
            const int gx = x0 - kPad + j;
            v[kh][j] = live && gy >= 0 && gy < rows && gx >= 0 && gx < width ? row[gx] : 0.0f;
        }
    }
    if constexpr (kSharedWeights) {
        __syncthreads();  // the taps are in
        if (!live) return;
    }
    const bool vector_store = width % 4 == 0 && aligned16(out);  // every output row starts aligned
#pragma unroll
    for (int f = 0; f < kF; ++f) {
        if (f0 + f >= M) break;
        float wt[kTapStride];
        if constexpr (kSharedWeights) {
#pragma unroll
            for (int j = 0; j < kTapStride; j += 4) {
                const float4 q = taps[(f * kTapStride + j) / 4];
                wt[j] = q.x; wt[j + 1] = q.y; wt[j + 2] = q.z; wt[j + 3] = q.w;
            }
        } else {
#pragma unroll
            for (int j = 0; j < kTaps; ++j) wt[j] = w[(long long)(f0 + f) * kTaps + j];
        }
        float acc[kR][4] = {};
#pragma unroll
        for (int kh = 0; kh < kK; ++kh)
#pragma unroll
            for (int kw = 0; kw < kK; ++kw)
#pragma unroll
                for (int r = 0; r < kR; ++r)
#pragma unroll
                    for (int i = 0; i < 4; ++i) acc[r][i] = fmaf(wt[kh * kK + kw], v[r + kh][i + kw], acc[r][i]);
#pragma unroll
        for (int r = 0; r < kR; ++r) {
            if (y0 + r >= rows) break;
            store_strip(out + ((long long)(f0 + f) * rows + y0 + r) * width + x0, acc[r], valid, vector_store, false);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Multi channel, stride-fixed block (section 3.2)
// ---------------------------------------------------------------------------------------------

#ifndef CM_K
#define CM_K 3
#endif
#ifndef CM_BM
#define CM_BM 64  // filters per block (the paper's N_f), a multiple of 8
#endif
#ifndef CM_TILE_H
#define CM_TILE_H 1  // output rows per block
#endif
#ifndef CM_TILE_W
#define CM_TILE_W 32  // output pixels per line (the paper's P_x), a multiple of CM_PX
#endif
#ifndef CM_RPT
#define CM_RPT 1  // output rows per thread
#endif
#ifndef CM_PX
#define CM_PX 1  // adjacent output pixels per thread: 1 or 4
#endif
#ifndef CM_CK
#define CM_CK 8  // channels per segment: 8 * K * K floats of each filter (32 bytes at 1x1)
#endif
#ifndef CM_MIN_BLOCKS
#define CM_MIN_BLOCKS 2
#endif

namespace multi {
constexpr int kK = CM_K, kPad = (CM_K - 1) / 2, kTaps = kK * kK;
constexpr int kBM = CM_BM, kTileH = CM_TILE_H, kTileW = CM_TILE_W, kRPT = CM_RPT, kPX = CM_PX, kCK = CM_CK;
constexpr int kFilters = 8;  // per thread
constexpr int kGroups = kBM / kFilters;
constexpr int kThreadsX = kTileW / kPX, kThreadsY = kTileH / kRPT;
constexpr int kPixelThreads = kThreadsX * kThreadsY;
constexpr int kThreads = kGroups * kPixelThreads;
// The staged window starts 4 columns left of the tile (16-byte aligned when the tile is) and is
// kTileW + 8 wide: staged column j is input column x0 - 4 + j, and the window of output lx spans
// staged columns lx + 4 - pad .. lx + 4 + pad.
constexpr int kInH = kTileH + kK - 1, kInW = kTileW + 8;
constexpr int kWStride = kBM + 4;  // [k][m] rows padded: the segment-ordered writes spread over banks
static_assert(kBM % kFilters == 0, "CM_BM must be a multiple of 8");
static_assert(kPX == 1 || kPX == 4, "CM_PX must be 1 or 4");
static_assert(kTileW % kPX == 0 && kTileW % 4 == 0 && kTileH % kRPT == 0, "tile must be whole threads, 4-wide");
static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
static_assert(kK % 2 == 1 && kK <= 5, "K must be 1, 3 or 5");

// Row stride of the staged input: conflict-free float4 reads of 4-pixel strips (kRPT rows apart);
// with one pixel per thread the reads are scalar and the window's own width will do.
constexpr int kInStride = kPX == 4 ? conflict_free_stride(kInW, kThreadsX, kRPT) : kInW;
constexpr int kInFloats = kInH * kInStride;          // one channel's input window
constexpr int kSegFloats = kCK * kTaps;              // one filter's segment
constexpr int kWFloats = kSegFloats * kWStride;      // the block's segments, [k][m]
constexpr int kStageFloats = kCK * kInFloats + kWFloats;
constexpr int kInElems = kCK * kInH * kInW, kStageElems = kInElems + kSegFloats * kBM;

struct Tile {
    int x0, y0, m0, c_lo, c_hi;  // output origin, first filter, this block's channel range
};

// Element e of a stage (input window first, then the filter segments in global order: a warp's
// consecutive elements are one filter's contiguous segment) as a global source and a staged slot.
__device__ __forceinline__ bool stage_element(
    int e, int c0, const Tile& t, int C, int H, int W, int M, const float* x, const float* w, const float*& src,
    int& slot)
{
    if (e < kInElems) {
        const int cc = e / (kInH * kInW), row = (e / kInW) % kInH, col = e % kInW;
        const int c = c0 + cc, gy = t.y0 - kPad + row, gx = t.x0 - 4 + col;
        slot = cc * kInFloats + row * kInStride + col;
        const bool valid = c < t.c_hi && gy >= 0 && gy < H && gx >= 0 && gx < W;
        src = valid ? x + ((long long)c * H + gy) * W + gx : x;
        return valid;
    }
    e -= kInElems;
    const int m = e / kSegFloats, k = e % kSegFloats;  // k = cc * K*K + tap
    slot = kCK * kInFloats + k * kWStride + m;
    const bool valid = t.m0 + m < M && c0 + k / kTaps < t.c_hi;
    src = valid ? w + ((long long)(t.m0 + m) * C + c0) * kTaps + k : w;
    return valid;
}

// cp.async a stage; input rows in 16-byte pieces where W % 4 == 0 and x is 16-byte aligned.
__device__ __forceinline__ void load_stage(
    float* stage, int c0, const Tile& t, int C, int H, int W, int M, const float* x, const float* w, bool rows16)
{
    int first = 0;
    if (rows16) {
        constexpr int kPieces = kInW / 4;
        for (int i = threadIdx.x; i < kCK * kInH * kPieces; i += kThreads) {
            const int cc = i / (kInH * kPieces), row = (i / kPieces) % kInH, piece = i % kPieces;
            const int c = c0 + cc, gy = t.y0 - kPad + row, gx = t.x0 - 4 + 4 * piece;
            const bool valid = c < t.c_hi && gy >= 0 && gy < H && gx >= 0 && gx < W;
            copy16(stage + cc * kInFloats + row * kInStride + 4 * piece,
                   valid ? x + ((long long)c * H + gy) * W + gx : x, valid ? 16 : 0);
        }
        first = kInElems;
    }
    for (int e = first + threadIdx.x; e < kStageElems; e += kThreads) {
        const float* src;
        int slot;
        const bool valid = stage_element(e, c0, t, C, H, W, M, x, w, src, slot);
        copy4(stage + slot, src, valid);
    }
}

// One stage's FMAs: kRPT x kPX outputs x 8 filters per thread.
__device__ __forceinline__ void compute_stage(
    const float* stage, float (&acc)[kRPT][kFilters][kPX], int group, int tx, int ty, int channels)
{
    const float* wt_base = stage + kCK * kInFloats + group * kFilters;
#pragma unroll 1
    for (int cc = 0; cc < channels; ++cc) {
        const float* in_c = stage + cc * kInFloats + (kRPT * ty) * kInStride + kPX * tx;
        const float* wt_c = wt_base + cc * kTaps * kWStride;
#pragma unroll
        for (int kh = 0; kh < kK; ++kh) {
            // Staged columns kPX*tx + 4 - pad .. + kPX + 2*pad - 1 of each of the thread's rows.
            constexpr int kFirst = 4 - kPad, kSpan = kPX + kK - 1;
            float v[kRPT][kSpan];
#pragma unroll
            for (int o = 0; o < kRPT; ++o) {
                const float* row = in_c + (kh + o) * kInStride;
                if constexpr (kPX == 4) {
                    float buf[12];
#pragma unroll
                    for (int q = kFirst / 4; q <= (kFirst + kSpan - 1) / 4; ++q) {
                        const float4 f = *reinterpret_cast<const float4*>(row + 4 * q);
                        buf[4 * q] = f.x; buf[4 * q + 1] = f.y; buf[4 * q + 2] = f.z; buf[4 * q + 3] = f.w;
                    }
#pragma unroll
                    for (int i = 0; i < kSpan; ++i) v[o][i] = buf[kFirst + i];
                } else {
#pragma unroll
                    for (int i = 0; i < kSpan; ++i) v[o][i] = row[kFirst + i];
                }
            }
#pragma unroll
            for (int kw = 0; kw < kK; ++kw) {
                const float* wk = wt_c + (kh * kK + kw) * kWStride;
                const float4 wa = *reinterpret_cast<const float4*>(wk);
                const float4 wb = *reinterpret_cast<const float4*>(wk + 4);
                const float wv[kFilters] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
                for (int o = 0; o < kRPT; ++o)
#pragma unroll
                    for (int f = 0; f < kFilters; ++f)
#pragma unroll
                        for (int i = 0; i < kPX; ++i) acc[o][f][i] = fmaf(wv[f], v[o][i + kw], acc[o][f][i]);
            }
        }
    }
}

}  // namespace multi

// Grid: (ceil(W / CM_TILE_W), ceil(H / CM_TILE_H), ceil(M / CM_BM) * splits); block z = filter
// block + blocks * split, split s sums channels [s * split_channels, +split_channels). With
// splits > 1, `counters` holds 3 zeroed ints per output tile (split::zero_tile_once). Dynamic shared
// memory: 2 * kStageFloats (1 * where a block sums one segment: double_buffered never touches the second).
extern "C" __global__ void __launch_bounds__(multi::kThreads, CM_MIN_BLOCKS) chang_multi(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int C, int H, int W, int M,
    int split_channels, int rows16, int* __restrict__ counters)
{
    using namespace multi;
    const int group = threadIdx.x / kPixelThreads;
    const int pixel = threadIdx.x % kPixelThreads;
    const int tx = pixel % kThreadsX, ty = pixel / kThreadsX;
    const int m_blocks = (M + kBM - 1) / kBM;
    const int split = blockIdx.z / m_blocks;
    Tile t{static_cast<int>(blockIdx.x) * kTileW, static_cast<int>(blockIdx.y) * kTileH,
           static_cast<int>(blockIdx.z % m_blocks) * kBM, split * split_channels,
           min(C, (split + 1) * split_channels)};
    if (t.c_lo >= C) return;  // uniform: a split past the channels (the launcher sizes the grid to avoid it)

    float acc[kRPT][kFilters][kPX];
#pragma unroll
    for (int o = 0; o < kRPT; ++o)
#pragma unroll
        for (int f = 0; f < kFilters; ++f)
#pragma unroll
            for (int i = 0; i < kPX; ++i) acc[o][f][i] = 0.0f;

    const int stages = (t.c_hi - t.c_lo + kCK - 1) / kCK;
    const auto load = [&](float* buffer, int s) { load_stage(buffer, t.c_lo + s * kCK, t, C, H, W, M, x, w, rows16); };
    load(dynamic_smem, 0);
    commit();
    // The tile's counters, recomputed where used (not kept live through the main loop).
    const auto tile_counters = [&] {
        return counters + 3 * ((blockIdx.z % m_blocks) * gridDim.y * gridDim.x + blockIdx.y * gridDim.x + blockIdx.x);
    };
    const bool add = split_channels < C;  // split: the tile is summed with atomics
    if (add) {  // zeroed while the first segment's copies fly
        split::zero_tile_once(tile_counters(), [&] {
#pragma unroll 1
            for (int i = threadIdx.x; i < kBM * kTileH * kTileW; i += kThreads) {
                const int m = t.m0 + i / (kTileH * kTileW), y = t.y0 + i / kTileW % kTileH, x0 = t.x0 + i % kTileW;
                if (m < M && y < H && x0 < W) out[((long long)m * H + y) * W + x0] = 0.0f;
            }
        });
    }
    double_buffered(dynamic_smem, kStageFloats, stages, load, [&](const float* buffer, int s) {
        compute_stage(buffer, acc, group, tx, ty, min(kCK, t.c_hi - t.c_lo - s * kCK));
    });

    if (add) split::await_zeroed(tile_counters());
    const bool vector_store = W % 4 == 0 && aligned16(out);
#pragma unroll
    for (int f = 0; f < kFilters; ++f) {
        const int m = t.m0 + group * kFilters + f;
        if (m >= M) break;
#pragma unroll
        for (int o = 0; o < kRPT; ++o) {
            const int y = t.y0 + kRPT * ty + o, x0 = t.x0 + kPX * tx;
            if (y >= H) continue;
            float* dst = out + ((long long)m * H + y) * W + x0;
            store_strip(dst, acc[o][f], W - x0, vector_store, add);
        }
    }
    if (add) split::finish(tile_counters(), split::count(C, split_channels));
}

// ---------------------------------------------------------------------------------------------
// Multi channel at 1x1: the stride-fixed block as a GEMM tile (past the paper)
// ---------------------------------------------------------------------------------------------
//
// At K = 1 the convolution is out[M][P] = w[M][C] x[C][P] over the P = H * W pixels, and the 2-D
// tile of chang_multi wastes its halo columns and, on 7x7..28x28 maps, most of the tile. This
// kernel flattens the pixels: a block owns CP_BM filters x CP_BP pixels, each thread CP_TM filters
// x CP_TP pixels (in strips of 4, CP_BP / (CP_TP / 4) apart, so a warp's float4 reads of one strip
// are contiguous). Per stage it stages a segment of CP_CK channels of each filter (the paper's
// 32-byte segment at CP_CK = 8, 64 bytes at 16; 4-byte copies, stored [k][m]) and the same
// channels of its pixels (16-byte copies where P % 4 == 0), CP_STAGES segments in flight (cp.async).
// Filter blocks run fastest (blockIdx.x), so the blocks of one pixel tile share its staged input
// through L2; blockIdx.z splits the channels (summed in one launch, split::zero_tile_once) for small layers.

#ifndef CP_BM
#define CP_BM 128  // filters per block
#endif
#ifndef CP_BP
#define CP_BP 128  // pixels per block
#endif
#ifndef CP_TM
#define CP_TM 8  // filters per thread: 4 or 8
#endif
#ifndef CP_TP
#define CP_TP 8  // pixels per thread: 4 or 8
#endif
#ifndef CP_CK
#define CP_CK 8  // channels per segment
#endif
#ifndef CP_STAGES
#define CP_STAGES 3  // segments in flight: the copies of the next CP_STAGES - 1 overlap this one's FMAs
#endif
#ifndef CP_MIN_BLOCKS
#define CP_MIN_BLOCKS 1
#endif

namespace pointwise {
constexpr int kBM = CP_BM, kBP = CP_BP, kTM = CP_TM, kTP = CP_TP, kCK = CP_CK, kStages = CP_STAGES;
constexpr int kStrips = kTP / 4, kStripStride = kBP / kStrips;
constexpr int kThreadsP = kBP / kTP, kThreads = (kBM / kTM) * kThreadsP;
constexpr int kWStride = kBM + 4;  // [k][m]: a warp's 4-byte writes (8 channels of 4 filters) hit 32 banks
constexpr int kStageFloats = kCK * kBP + kCK * kWStride;
static_assert((kTM == 4 || kTM == 8) && (kTP == 4 || kTP == 8), "CP_TM and CP_TP must be 4 or 8");
static_assert(kBM % kTM == 0 && kBP % kTP == 0, "the block tile must be whole threads");
static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
static_assert(kStages >= 2, "CP_STAGES must be 2 or more");

// cp.async one stage: channels c0 .. c0 + kCK - 1 (zero past c_hi) of the block's pixels and filters.
__device__ __forceinline__ void load_stage(
    float* stage, const float* __restrict__ x, const float* __restrict__ w, int c0, int c_hi, int p0, int m0, int C,
    int P, int M, bool vec16)
{
    if (vec16) {  // P % 4 == 0 and x 16-byte aligned: a float4 is all inside the map or all outside
        for (int i = threadIdx.x; i < kCK * kBP / 4; i += kThreads) {
            const int k = i / (kBP / 4), p = p0 + 4 * (i % (kBP / 4));
            const bool valid = c0 + k < c_hi && p < P;
            copy16(stage + 4 * i, valid ? x + (long long)(c0 + k) * P + p : x, valid ? 16 : 0);
        }
    } else {
        for (int i = threadIdx.x; i < kCK * kBP; i += kThreads) {
            const int k = i / kBP, p = p0 + i % kBP;
            const bool valid = c0 + k < c_hi && p < P;
            copy4(stage + i, valid ? x + (long long)(c0 + k) * P + p : x, valid);
        }
    }
    float* wt = stage + kCK * kBP;
    for (int i = threadIdx.x; i < kCK * kBM; i += kThreads) {  // consecutive threads: one filter's segment
        const int m = i / kCK, k = i % kCK;
        const bool valid = m0 + m < M && c0 + k < c_hi;
        copy4(wt + k * kWStride + m, valid ? w + (long long)(m0 + m) * C + c0 + k : w, valid);
    }
}
}  // namespace pointwise

// Grid: (ceil(M / CP_BM), ceil(P / CP_BP), splits); split s sums channels [s * split_channels,
// +split_channels); with splits > 1, `counters` holds 3 zeroed ints per output tile (split::zero_tile_once).
// Dynamic shared memory: CP_STAGES * kStageFloats floats (fewer where a block sums fewer segments).
extern "C" __global__ void __launch_bounds__(pointwise::kThreads, CP_MIN_BLOCKS) chang_pointwise(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int C, int P, int M,
    int split_channels, int vec16, int* __restrict__ counters)
{
    using namespace pointwise;
    const int m0 = blockIdx.x * kBM, p0 = blockIdx.y * kBP;
    const int c_lo = blockIdx.z * split_channels, c_hi = min(C, c_lo + split_channels);
    if (c_lo >= C) return;  // uniform over the block
    const int tm = threadIdx.x / kThreadsP, tp = threadIdx.x % kThreadsP;

    float acc[kTM][kTP];
#pragma unroll
    for (int f = 0; f < kTM; ++f)
#pragma unroll
        for (int i = 0; i < kTP; ++i) acc[f][i] = 0.0f;

    // A ring of kStages buffers, one barrier per segment: after the barrier of segment s every thread
    // is done with segment s - 1, whose buffer then takes segment s + kStages - 1. Every iteration
    // commits a group (empty past the end), so wait_stages<kStages - 2> always means "segment s landed".
    const int segments = (c_hi - c_lo + kCK - 1) / kCK;
    auto buffer = [](int s) { return dynamic_smem + (s % kStages) * kStageFloats; };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < segments) load_stage(buffer(s), x, w, c_lo + s * kCK, c_hi, p0, m0, C, P, M, vec16);
        commit();
    }
    // The tile's counters, recomputed where used (kept live through the main loop, 8 x 8 tiles spill).
    const auto tile_counters = [&] { return counters + 3 * (blockIdx.y * gridDim.x + blockIdx.x); };
    const bool add = split_channels < C;  // split: the tile is summed with atomics
    if (add) {  // zeroed while the first segments' copies fly
        split::zero_tile_once(tile_counters(), [&] {
#pragma unroll 1
            for (int i = threadIdx.x; i < kBM * kBP; i += kThreads) {
                const int m = m0 + i / kBP, p = p0 + i % kBP;
                if (m < M && p < P) out[(long long)m * P + p] = 0.0f;
            }
        });
    }
    for (int s = 0; s < segments; ++s) {
        wait_stages<kStages - 2>();
        __syncthreads();
        const int next = s + kStages - 1;
        if (next < segments) load_stage(buffer(next), x, w, c_lo + next * kCK, c_hi, p0, m0, C, P, M, vec16);
        commit();
        const float* xs = buffer(s);
        const float* ws = xs + kCK * kBP;
#pragma unroll
        for (int k = 0; k < kCK; ++k) {  // zero-filled past c_hi: a partial segment adds nothing
            float wv[kTM], xv[kTP];
#pragma unroll
            for (int q = 0; q < kTM / 4; ++q) {
                const float4 f4 = *reinterpret_cast<const float4*>(ws + k * kWStride + tm * kTM + 4 * q);
                wv[4 * q] = f4.x; wv[4 * q + 1] = f4.y; wv[4 * q + 2] = f4.z; wv[4 * q + 3] = f4.w;
            }
#pragma unroll
            for (int q = 0; q < kStrips; ++q) {
                const float4 p4 = *reinterpret_cast<const float4*>(xs + k * kBP + q * kStripStride + 4 * tp);
                xv[4 * q] = p4.x; xv[4 * q + 1] = p4.y; xv[4 * q + 2] = p4.z; xv[4 * q + 3] = p4.w;
            }
#pragma unroll
            for (int f = 0; f < kTM; ++f)
#pragma unroll
                for (int i = 0; i < kTP; ++i) acc[f][i] = fmaf(wv[f], xv[i], acc[f][i]);
        }
    }

    if (add) split::await_zeroed(tile_counters());
    const bool vector_store = P % 4 == 0 && aligned16(out);
#pragma unroll
    for (int f = 0; f < kTM; ++f) {
        const int m = m0 + tm * kTM + f;
        if (m >= M) break;
#pragma unroll
        for (int q = 0; q < kStrips; ++q) {
            const int p = p0 + q * kStripStride + 4 * tp;
            if (p >= P) continue;
            const float strip[4] = {acc[f][4 * q], acc[f][4 * q + 1], acc[f][4 * q + 2], acc[f][4 * q + 3]};
            store_strip(out + (long long)m * P + p, strip, P - p, vector_store, add);
        }
    }
    if (add) split::finish(tile_counters(), split::count(C, split_channels));
}

// ---------------------------------------------------------------------------------------------
// Multi channel, 3x3 and 5x5: a filter per thread, the input broadcast (past the paper)
// ---------------------------------------------------------------------------------------------
//
// chang_multi's 8 filters x 4 pixels per thread stage transposed weights with 4-byte copies; on small
// maps those copies cost more instructions than the FMAs, and few warps fit an SM (ncu at
// 7-1-5-512-512: 45% of the instructions are FMAs, 8 warps per SM). Here a thread owns one filter's
// CB_TILE_H x CB_TILE_W outputs (49 accumulators at 7x7) and a warp's 32 threads are 32 filters of the
// same tile: every staged input read is a broadcast, and each input row read serves every tap that
// touches it (ncu at 56-1-5-512-512: 82% FMAs). The weights stay in global order
// ([filter][channel][tap]), so a segment of CB_CK channels is copied in 16-byte pieces where C % 4 == 0.
// A block holds CB_FILTERS filters for CB_TILES tiles (the warps of different tiles read the same
// staged weights: more warps per SM for the same shared memory). The channels split over blocks
// (blockIdx.z) as in chang_multi.

#ifndef CB_K
#define CB_K 3
#endif
#ifndef CB_FILTERS
#define CB_FILTERS 64  // filters per block: one per thread of each tile
#endif
#ifndef CB_TILES
#define CB_TILES 1  // output tiles per block
#endif
#ifndef CB_TILE_H
#define CB_TILE_H 7  // output rows per thread
#endif
#ifndef CB_TILE_W
#define CB_TILE_W 7  // output columns per thread
#endif
#ifndef CB_CK
#define CB_CK 4  // channels per segment: a multiple of 4, so a segment is whole 16-byte pieces
#endif
#ifndef CB_MIN_BLOCKS
#define CB_MIN_BLOCKS 2
#endif

namespace broadcast {
constexpr int kK = CB_K, kPad = (CB_K - 1) / 2, kTaps = kK * kK;
constexpr int kFilters = CB_FILTERS, kTiles = CB_TILES, kThreads = kFilters * kTiles;
constexpr int kTileH = CB_TILE_H, kTileW = CB_TILE_W, kCK = CB_CK;
constexpr int kInH = kTileH + kK - 1, kInW = kTileW + kK - 1;
constexpr int kInStride = (kInW + 3) / 4 * 4;  // whole float4s per staged row
constexpr int kWindowFloats = kCK * kInH * kInStride;  // one tile's input windows of a segment
constexpr int kInFloats = kTiles * kWindowFloats;
constexpr int kSeg = kCK * kTaps;  // one filter's segment
// A warp reads one column of 32 filter rows: a stride of an odd number of float4s spreads them over 8
// bank quads (4-way, the least a 16-byte-aligned row allows).
constexpr int kWStride = (kSeg / 4) % 2 ? kSeg : kSeg + 4;
constexpr int kStageFloats = kInFloats + kFilters * kWStride;
// The epilogue's staging of the block's sums (over the stage buffers, after the last stage): a tile's
// outputs per thread, an odd stride apart so that a warp's 32 filters write 32 different banks.
constexpr int kTileOut = kTileH * kTileW, kOutStride = kTileOut | 1;
static_assert(kFilters % 32 == 0 && kThreads <= 1024, "CB_FILTERS: whole warps; at most 1024 threads");
static_assert(kCK % 4 == 0, "CB_CK must be a multiple of 4");
static_assert(kK % 2 == 1 && kK <= 5, "K must be 1, 3 or 5");

// The block's tiles: tile first + j (j < kTiles) of `count`, row-major over tiles_x per row.
struct Tiles {
    int first, count, tiles_x;
    __device__ __forceinline__ int x0(int j) const { return (first + j) % tiles_x * kTileW; }
    __device__ __forceinline__ int y0(int j) const { return (first + j) / tiles_x * kTileH; }
};

struct Block {
    Tiles tiles;
    int m0, c_lo, c_hi;  // first filter, this block's channel range
};

// cp.async the segment of channels c0 .. c0 + kCK - 1 (zero past c_hi): each tile's input windows
// ([tile][channel][row][column], column j is input column x0 - pad + j) and the block's filters' weights
// ([filter][channel][tap]); 16-byte pieces of weights where `vec16` (C % 4 == 0 and w 16-byte aligned:
// then a piece never straddles c_hi, a multiple of 4 channels from c0).
__device__ __forceinline__ void load_stage(
    float* stage, const float* __restrict__ x, const float* __restrict__ w, int c0, const Block& b, int C, int H,
    int W, int M, bool vec16)
{
    for (int i = threadIdx.x; i < kTiles * kCK * kInH * kInW; i += kThreads) {
        const int j = i / (kCK * kInH * kInW), cc = i / (kInH * kInW) % kCK, row = i / kInW % kInH, col = i % kInW;
        const int c = c0 + cc, gy = b.tiles.y0(j) - kPad + row, gx = b.tiles.x0(j) - kPad + col;
        const bool valid = b.tiles.first + j < b.tiles.count && c < b.c_hi && gy >= 0 && gy < H && gx >= 0 && gx < W;
        copy4(stage + ((j * kCK + cc) * kInH + row) * kInStride + col,
              valid ? x + ((long long)c * H + gy) * W + gx : x, valid);
    }
    float* ws = stage + kInFloats;
    if (vec16) {
        constexpr int kPieces = kSeg / 4;
        for (int i = threadIdx.x; i < kFilters * kPieces; i += kThreads) {  // a warp: one filter's segment
            const int f = i / kPieces, k = 4 * (i % kPieces);
            const bool valid = b.m0 + f < M && c0 + k / kTaps < b.c_hi;
            copy16(ws + f * kWStride + k, valid ? w + ((long long)(b.m0 + f) * C + c0) * kTaps + k : w, valid ? 16 : 0);
        }
    } else {
        for (int i = threadIdx.x; i < kFilters * kSeg; i += kThreads) {
            const int f = i / kSeg, k = i % kSeg;
            const bool valid = b.m0 + f < M && c0 + k / kTaps < b.c_hi;
            copy4(ws + f * kWStride + k, valid ? w + ((long long)(b.m0 + f) * C + c0) * kTaps + k : w, valid);
        }
    }
}

// One segment's FMAs for this thread's filter `f` and tile `j` (zero-filled past c_hi: a partial
// segment adds nothing). Input row iy of a channel feeds output rows iy - r for each filter row r.
__device__ __forceinline__ void compute_stage(const float* stage, float (&acc)[kTileH][kTileW], int f, int j)
{
    const float* wrow = stage + kInFloats + f * kWStride;
#pragma unroll 1
    for (int cc = 0; cc < kCK; ++cc) {
        float wv[kTaps];
#pragma unroll
        for (int k = 0; k < kTaps; ++k) wv[k] = wrow[cc * kTaps + k];
        const float* in_c = stage + j * kWindowFloats + cc * kInH * kInStride;
#pragma unroll
        for (int iy = 0; iy < kInH; ++iy) {
            float v[kInStride];
#pragma unroll
            for (int q = 0; q < kInStride / 4; ++q) {
                const float4 p = *reinterpret_cast<const float4*>(in_c + iy * kInStride + 4 * q);
                v[4 * q] = p.x; v[4 * q + 1] = p.y; v[4 * q + 2] = p.z; v[4 * q + 3] = p.w;
            }
#pragma unroll
            for (int r = 0; r < kK; ++r) {
                const int oy = iy - r;
                if (oy < 0 || oy >= kTileH) continue;  // resolved at compile time
#pragma unroll
                for (int s = 0; s < kK; ++s)
#pragma unroll
                    for (int ox = 0; ox < kTileW; ++ox) acc[oy][ox] = fmaf(wv[r * kK + s], v[ox + s], acc[oy][ox]);
            }
        }
    }
}

// Write (or add, `add`: a channel split) the block's sums. A thread's own outputs are one filter's
// tile, and a warp's 32 filters lie a map apart: stored directly, each warp instruction would touch 32
// sectors. So the sums go through shared memory and consecutive threads take consecutive outputs of a
// filter's tile (runs of kTileW adjacent floats). Where the map is one tile, the block's filters'
// outputs are one contiguous run, written in float4s (float4 atomics on sm_90) where 16-byte aligned.
__device__ __forceinline__ void store_sums(float* sums, const float (&acc)[kTileH][kTileW], const Block& b, int f,
                                           int j, float* __restrict__ out, int H, int W, int M, bool add)
{
    float* mine = sums + (j * kFilters + f) * kOutStride;
#pragma unroll
    for (int oy = 0; oy < kTileH; ++oy)
#pragma unroll
        for (int ox = 0; ox < kTileW; ++ox) mine[oy * kTileW + ox] = acc[oy][ox];
    __syncthreads();
    if (b.tiles.count == 1) {  // the map in one tile: filter m's outputs are out[m * H * W ...]
        const int hw = H * W, n = min(kFilters, M - b.m0) * hw;
        float* run = out + (long long)b.m0 * hw;  // 16-byte aligned with `out`: m0 is a multiple of 32
        const bool vector = aligned16(run);
#pragma unroll 1
        for (int e = 4 * threadIdx.x; e < n; e += 4 * kThreads) {
            float v[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int q = (e + i) % hw;  // position in the map, row-major
                v[i] = e + i < n ? sums[(e + i) / hw * kOutStride + q / W * kTileW + q % W] : 0.0f;
            }
            store_strip(run + e, v, n - e, vector, add);
        }
        return;
    }
#pragma unroll 1
    for (int e = threadIdx.x; e < kThreads * kTileOut; e += kThreads) {
        const int tile = e / (kFilters * kTileOut), m = b.m0 + e / kTileOut % kFilters, p = e % kTileOut;
        const int y = b.tiles.y0(tile) + p / kTileW, x = b.tiles.x0(tile) + p % kTileW;
        if (b.tiles.first + tile >= b.tiles.count || m >= M || y >= H || x >= W) continue;
        const float v = sums[e / kTileOut * kOutStride + p];
        float* dst = out + ((long long)m * H + y) * W + x;
        if (add) atomicAdd(dst, v);
        else *dst = v;
    }
}
}  // namespace broadcast

// Grid: (ceil(M / CB_FILTERS), ceil(tiles / CB_TILES), splits), tiles = ceil(H / CB_TILE_H) x
// ceil(W / CB_TILE_W); split s sums channels [s * split_channels, +split_channels); with splits > 1,
// `counters` holds 3 zeroed ints per (tile group, filter block) (split::zero_tile_once). Thread t:
// filter t % CB_FILTERS of tile t / CB_FILTERS. Dynamic shared memory: 2 * kStageFloats
// floats (1 * where a block sums one segment), and at least kThreads * kOutStride (store_sums).
extern "C" __global__ void __launch_bounds__(broadcast::kThreads, CB_MIN_BLOCKS) chang_broadcast(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int C, int H, int W, int M,
    int split_channels, int vec16, int* __restrict__ counters)
{
    using namespace broadcast;
    const int tiles_x = (W + kTileW - 1) / kTileW;
    const Block b{{static_cast<int>(blockIdx.y) * kTiles, tiles_x * ((H + kTileH - 1) / kTileH), tiles_x},
                  static_cast<int>(blockIdx.x) * kFilters, static_cast<int>(blockIdx.z) * split_channels,
                  min(C, static_cast<int>(blockIdx.z + 1) * split_channels)};
    if (b.c_lo >= C) return;  // uniform over the block
    const int f = threadIdx.x % kFilters, j = threadIdx.x / kFilters;

    float acc[kTileH][kTileW];
#pragma unroll
    for (int oy = 0; oy < kTileH; ++oy)
#pragma unroll
        for (int ox = 0; ox < kTileW; ++ox) acc[oy][ox] = 0.0f;

    const int segments = (b.c_hi - b.c_lo + kCK - 1) / kCK;
    const auto load = [&](float* buffer, int s) { load_stage(buffer, x, w, b.c_lo + s * kCK, b, C, H, W, M, vec16); };
    load(dynamic_smem, 0);
    commit();
    const auto tile_counters = [&] { return counters + 3 * (blockIdx.y * gridDim.x + blockIdx.x); };
    const bool add = split_channels < C;  // split: the tile is summed with atomics
    if (add) {  // zeroed while the first segment's copies fly
        split::zero_tile_once(tile_counters(), [&] {
#pragma unroll 1
            for (int i = threadIdx.x; i < kTiles * kFilters * kTileH * kTileW; i += kThreads) {
                const int tile = i / (kFilters * kTileH * kTileW), m = b.m0 + i / (kTileH * kTileW) % kFilters;
                const int y = b.tiles.y0(tile) + i / kTileW % kTileH, x0 = b.tiles.x0(tile) + i % kTileW;
                if (b.tiles.first + tile < b.tiles.count && m < M && y < H && x0 < W)
                    out[((long long)m * H + y) * W + x0] = 0.0f;
            }
        });
    }
    double_buffered(dynamic_smem, kStageFloats, segments, load,
                    [&](const float* buffer, int) { compute_stage(buffer, acc, f, j); });

    if (add) split::await_zeroed(tile_counters());
    store_sums(dynamic_smem, acc, b, f, j, out, H, W, M, add);
    if (add) split::finish(tile_counters(), split::count(C, split_channels));
}
