// The fused CNN layer of H. Grisett, "Investigation of CUDA Optimizations for Accelerating a Toy
// CNN Architecture" (UCLA course report, Tesla T4), and the study's steps past it.
//
//   out[m][i][j] = max over the 2x2 window at (2i, 2j) of ReLU(bias[m] + sum_{c,r,s} w[m][c][r][s] * x[c][.+r][.+s])
//
// x is the pre-padded input [C][H][W] (the lab: 256 x 228 x 228, a 224x224 image padded by 2), w is
// [M][C][5][5], bias [M], out [M][(H-4)/2][(W-4)/2] (the lab: 256 x 112 x 112). One image, float32,
// C-contiguous, FP32 FMA accumulation. 5x5 filters only, as in the lab.
//
// The report's ladder (its sections 1-4, Table 2). Grid and block are runtime launch parameters as
// in its sweep (Table 3): blockDim.x/y cover pooled columns/rows, blockDim.z output channels, and
// the channel loop strides by gridDim.z * blockDim.z, so a grid.z * block.z above M (the report's
// (7,7,96) x (16,16,4)) or below it both cover every channel.
//   toy_v0: "GPU kernel fusion (baseline)": one thread per pooled output, weights and input read
//     from global memory, the four pooling positions in a loop.
//   toy_v1: + shared-memory tiling: per input channel the block stages the input window of its
//     pooled tile (Figure 1's SHARED_MEM_TILE_HEIGHT/WIDTH, sized from blockDim at run time, the
//     report's "dynamic tile"); the four pooled positions are still a loop over an array of sums.
//     The tile is loaded by every thread of the block, z included. (Figure 2 as printed computes the
//     element index as tid * i * n, which would load element 0 only on the first pass; we use the
//     intended tid + i * n.)
//   toy_v2: + the 2x2 max-pool unrolled into four straight-line sums (Figures 3-4).
//   toy_v3: + `const` on the index helpers' parameters.
//   toy_v4: + `#pragma unroll` on the 5x5 loops.
// Past the report (issue 4, "V5 and beyond"):
//   toy_fused_tiled: a register-tiled direct convolution with the bias, ReLU and pool in its
//     epilogue. A block computes TOY_BM output channels x a TOY_TILE_H x TOY_TILE_W tile of
//     convolution outputs; each thread 8 channels x 2 rows x 4 columns (64 accumulators), so its
//     2x2 pooling windows are its own and the pool needs no communication. Per input channel the
//     block stages the (TILE_H+4) x (TILE_W+4) input window and the 25 x BM weights in shared
//     memory, TOY_CK channels per stage, double-buffered with cp.async (16-byte copies of the input
//     rows where the row width allows; the weights are transposed to [tap][m] on the way, 4 bytes at
//     a time, so a warp's eight filters are two broadcast float4 reads). Per filter row each thread
//     reads two 8-wide input rows once and slides them across the 5 taps: 14 float4 shared-memory
//     reads feed 320 FMAs. With TOY_FUSE_POOL=0 it writes the plain convolution instead, which
//     bias_relu_pool then finishes: the unfused comparison.
//
// Not reproduced: the report's host program, and its exact sources beyond Figures 1-4.

#include <cuda_runtime.h>

#include "staging.cuh"

constexpr int kKernelSize = 5;  // the lab's 5x5 filters
constexpr int kPoolSize = 2;    // 2x2 max-pool, stride 2
constexpr int kPoolStride = 2;

// Every kernel's dynamic shared memory (one declaration: a name per kernel would clash).
extern __shared__ __align__(16) float dynamic_smem[];

// ---------------------------------------------------------------------------------------------
// The report's ladder, V0..V4
// ---------------------------------------------------------------------------------------------

__device__ inline int feature_map_idx(int c, int h, int w, int height, int width)
{
    return (c * height + h) * width + w;
}

__device__ inline int weight_idx(int m, int c, int kh, int kw, int channels)
{
    return ((m * channels + c) * kKernelSize + kh) * kKernelSize + kw;
}

// V3's helpers: the same arithmetic with `const` parameters (the report's "const helpers").
__device__ inline int feature_map_idx_const(const int c, const int h, const int w, const int height, const int width)
{
    return (c * height + h) * width + w;
}

__device__ inline int weight_idx_const(const int m, const int c, const int kh, const int kw, const int channels)
{
    return ((m * channels + c) * kKernelSize + kh) * kKernelSize + kw;
}

extern "C" __global__ void toy_v0(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ out, int C, int H, int W, int M, int PH, int PW)
{
    const int pw = blockIdx.x * blockDim.x + threadIdx.x;
    const int ph = blockIdx.y * blockDim.y + threadIdx.y;
    if (pw >= PW || ph >= PH) return;
    for (int m = blockIdx.z * blockDim.z + threadIdx.z; m < M; m += gridDim.z * blockDim.z) {
        float pooled = 0.0f;  // every candidate is a ReLU output, >= 0
        for (int p = 0; p < kPoolSize * kPoolSize; ++p) {
            const int h0 = ph * kPoolStride + p / kPoolSize;
            const int w0 = pw * kPoolStride + p % kPoolSize;
            float sum = bias[m];
            for (int c = 0; c < C; ++c)
                for (int kh = 0; kh < kKernelSize; ++kh)
                    for (int kw = 0; kw < kKernelSize; ++kw)
                        sum += w[weight_idx(m, c, kh, kw, C)] * x[feature_map_idx(c, h0 + kh, w0 + kw, H, W)];
            pooled = fmaxf(pooled, fmaxf(0.0f, sum));
        }
        out[feature_map_idx(m, ph, pw, PH, PW)] = pooled;
    }
}

// Stage the input window of channel c for this block's pooled tile (Figure 2, every thread of the
// block taking a share); zero outside the input.
__device__ inline void load_input_tile(
    float* tile, const float* __restrict__ x, int c, int H, int W, int tile_h, int tile_w)
{
    const int threads = blockDim.x * blockDim.y * blockDim.z;
    const int tid = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    const int base_h = blockIdx.y * blockDim.y * kPoolStride;
    const int base_w = blockIdx.x * blockDim.x * kPoolStride;
    for (int i = tid; i < tile_h * tile_w; i += threads) {
        const int g_h = base_h + i / tile_w;
        const int g_w = base_w + i % tile_w;
        tile[i] = (g_h < H && g_w < W) ? x[feature_map_idx(c, g_h, g_w, H, W)] : 0.0f;
    }
}

extern "C" __global__ void toy_v1(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ out, int C, int H, int W, int M, int PH, int PW)
{
    float* tile = dynamic_smem;
    const int tile_h = (blockDim.y - 1) * kPoolStride + kPoolSize + kKernelSize - 1;  // Figure 1
    const int tile_w = (blockDim.x - 1) * kPoolStride + kPoolSize + kKernelSize - 1;
    const int pw = blockIdx.x * blockDim.x + threadIdx.x;
    const int ph = blockIdx.y * blockDim.y + threadIdx.y;
    // The channel loop is uniform over the block (its bound depends on blockIdx.z only), so every
    // thread reaches the barriers inside it.
    for (int m_base = blockIdx.z * blockDim.z; m_base < M; m_base += gridDim.z * blockDim.z) {
        const int m = m_base + threadIdx.z;
        const bool active = pw < PW && ph < PH && m < M;
        float sums[kPoolSize * kPoolSize];
        for (int p = 0; p < kPoolSize * kPoolSize; ++p) sums[p] = active ? bias[m] : 0.0f;
        for (int c = 0; c < C; ++c) {
            __syncthreads();  // the previous channel's tile is no longer read
            load_input_tile(tile, x, c, H, W, tile_h, tile_w);
            __syncthreads();
            if (!active) continue;
            for (int p = 0; p < kPoolSize * kPoolSize; ++p) {
                const int lh = threadIdx.y * kPoolStride + p / kPoolSize;
                const int lw = threadIdx.x * kPoolStride + p % kPoolSize;
                for (int kh = 0; kh < kKernelSize; ++kh)
                    for (int kw = 0; kw < kKernelSize; ++kw)
                        sums[p] += w[weight_idx(m, c, kh, kw, C)] * tile[(lh + kh) * tile_w + lw + kw];
            }
        }
        if (active) {
            float pooled = 0.0f;
            for (int p = 0; p < kPoolSize * kPoolSize; ++p) pooled = fmaxf(pooled, fmaxf(0.0f, sums[p]));
            out[feature_map_idx(m, ph, pw, PH, PW)] = pooled;
        }
    }
}

// One 5x5 window of channel c into `sum` (Figure 3's inner loops). kVersion 2: as printed;
// 3: const helpers; 4: const helpers and #pragma unroll.
template <int kVersion>
__device__ inline void window_sum(
    float& sum, const float* __restrict__ w, const float* tile, int m, int c, int C, int lh, int lw, int tile_w)
{
    if constexpr (kVersion == 2) {
        for (int kh = 0; kh < kKernelSize; ++kh)
            for (int kw = 0; kw < kKernelSize; ++kw)
                sum += w[weight_idx(m, c, kh, kw, C)] * tile[(lh + kh) * tile_w + lw + kw];
    } else if constexpr (kVersion == 3) {
        for (int kh = 0; kh < kKernelSize; ++kh)
            for (int kw = 0; kw < kKernelSize; ++kw)
                sum += w[weight_idx_const(m, c, kh, kw, C)] * tile[(lh + kh) * tile_w + lw + kw];
    } else {
#pragma unroll
        for (int kh = 0; kh < kKernelSize; ++kh)
#pragma unroll
            for (int kw = 0; kw < kKernelSize; ++kw)
                sum += w[weight_idx_const(m, c, kh, kw, C)] * tile[(lh + kh) * tile_w + lw + kw];
    }
}

template <int kVersion>
__device__ void unrolled_pool_layer(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ out, int C, int H, int W, int M, int PH, int PW)
{
    float* tile = dynamic_smem;
    const int tile_h = (blockDim.y - 1) * kPoolStride + kPoolSize + kKernelSize - 1;
    const int tile_w = (blockDim.x - 1) * kPoolStride + kPoolSize + kKernelSize - 1;
    const int pw = blockIdx.x * blockDim.x + threadIdx.x;
    const int ph = blockIdx.y * blockDim.y + threadIdx.y;
    const int local_conv_h_0 = threadIdx.y * kPoolStride, local_conv_h_1 = local_conv_h_0 + 1;
    const int local_conv_w_0 = threadIdx.x * kPoolStride, local_conv_w_1 = local_conv_w_0 + 1;
    for (int m_base = blockIdx.z * blockDim.z; m_base < M; m_base += gridDim.z * blockDim.z) {
        const int m = m_base + threadIdx.z;
        const bool active = pw < PW && ph < PH && m < M;
        const float b = active ? bias[m] : 0.0f;
        float conv_sum_00 = b, conv_sum_01 = b, conv_sum_10 = b, conv_sum_11 = b;
        for (int c = 0; c < C; ++c) {
            __syncthreads();
            load_input_tile(tile, x, c, H, W, tile_h, tile_w);
            __syncthreads();
            if (!active) continue;
            window_sum<kVersion>(conv_sum_00, w, tile, m, c, C, local_conv_h_0, local_conv_w_0, tile_w);
            window_sum<kVersion>(conv_sum_01, w, tile, m, c, C, local_conv_h_0, local_conv_w_1, tile_w);
            window_sum<kVersion>(conv_sum_10, w, tile, m, c, C, local_conv_h_1, local_conv_w_0, tile_w);
            window_sum<kVersion>(conv_sum_11, w, tile, m, c, C, local_conv_h_1, local_conv_w_1, tile_w);
        }
        if (active) {  // Figure 4
            float max_pool_val = 0.0f;
            max_pool_val = fmaxf(max_pool_val, fmaxf(0.0f, conv_sum_00));
            max_pool_val = fmaxf(max_pool_val, fmaxf(0.0f, conv_sum_01));
            max_pool_val = fmaxf(max_pool_val, fmaxf(0.0f, conv_sum_10));
            max_pool_val = fmaxf(max_pool_val, fmaxf(0.0f, conv_sum_11));
            out[feature_map_idx(m, ph, pw, PH, PW)] = max_pool_val;
        }
    }
}

extern "C" __global__ void toy_v2(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ out, int C, int H, int W, int M, int PH, int PW)
{
    unrolled_pool_layer<2>(x, w, bias, out, C, H, W, M, PH, PW);
}

extern "C" __global__ void toy_v3(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ out, int C, int H, int W, int M, int PH, int PW)
{
    unrolled_pool_layer<3>(x, w, bias, out, C, H, W, M, PH, PW);
}

extern "C" __global__ void toy_v4(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ out, int C, int H, int W, int M, int PH, int PW)
{
    unrolled_pool_layer<4>(x, w, bias, out, C, H, W, M, PH, PW);
}

// ---------------------------------------------------------------------------------------------
// Past the report: toy_fused_tiled (V5) and the unfused epilogue
// ---------------------------------------------------------------------------------------------

#ifndef TOY_BM
#define TOY_BM 64  // output channels per block (a launch knob, set with -D; tuned on H100)
#endif
#ifndef TOY_TILE_H
#define TOY_TILE_H 16  // convolution rows per block (even: whole pooling windows)
#endif
#ifndef TOY_TILE_W
#define TOY_TILE_W 16  // convolution columns per block (a multiple of 4)
#endif
#ifndef TOY_CK
#define TOY_CK 4  // input channels per pipeline stage
#endif
#ifndef TOY_MIN_BLOCKS
#define TOY_MIN_BLOCKS 2  // __launch_bounds__ blocks per SM: caps registers at 65536 / (2 * threads)
#endif
#ifndef TOY_FUSE_POOL
#define TOY_FUSE_POOL 1  // 0: write the plain convolution (no bias) for bias_relu_pool
#endif

namespace tiled {
constexpr int kChannelsPerThread = 8;  // two float4 weight reads per tap
constexpr int kRowsPerThread = 2;      // one pooling window high
constexpr int kColsPerThread = 4;      // two pooling windows wide; 4 + 4 input columns = two float4
constexpr int kBM = TOY_BM, kTileH = TOY_TILE_H, kTileW = TOY_TILE_W, kCK = TOY_CK;
constexpr int kGroups = kBM / kChannelsPerThread;
constexpr int kThreadsX = kTileW / kColsPerThread;
constexpr int kThreadsY = kTileH / kRowsPerThread;
constexpr int kPixelThreads = kThreadsX * kThreadsY;
constexpr int kThreads = kGroups * kPixelThreads;
constexpr int kTaps = kKernelSize * kKernelSize;
constexpr int kInH = kTileH + kKernelSize - 1;
constexpr int kInW = kTileW + kKernelSize - 1;
static_assert(kBM % kChannelsPerThread == 0, "TOY_BM must be a multiple of 8");
static_assert(kTileW % kColsPerThread == 0 && kTileH % kRowsPerThread == 0, "tile must be 4-wide, 2-high multiples");
static_assert(kPixelThreads % 32 == 0, "a warp must hold one channel group (broadcast weight reads)");
static_assert(kThreads <= 1024, "at most 1024 threads per block");

// Row stride of the staged input: 16-byte rows for float4 reads and cp.async, conflict-free for the
// 8 lanes of one LDS.128 phase spread over 8 / kThreadsX thread rows two input rows apart.
constexpr int kInStride = conflict_free_stride(kInW, kThreadsX, kRowsPerThread);
constexpr int kInFloats = kInH * kInStride;  // one channel's input window
constexpr int kWFloats = kTaps * kBM;         // one channel's weights, [tap][m]
constexpr int kStageFloats = kCK * (kInFloats + kWFloats);

// Stage channels c0 .. c0+kCK-1: input windows [cc][row][col] and weights [cc][tap][m], zero
// outside the input, past C, and past M.
__device__ __forceinline__ void load_stage(
    float* stage, const float* __restrict__ x, const float* __restrict__ w, int c0, int m0,
    int C, int H, int W, int M, int y0, int x0, bool rows16)
{
    const int tid = threadIdx.x;
    float* in = stage;
    float* wt = stage + kCK * kInFloats;
    if (rows16) {  // W % 4 == 0 and x 16-byte aligned: whole 16-byte pieces of each row
        constexpr int kPieces = kInW / 4;
        for (int i = tid; i < kCK * kInH * kPieces; i += kThreads) {
            const int cc = i / (kInH * kPieces), row = (i / kPieces) % kInH, piece = i % kPieces;
            const int c = c0 + cc, gy = y0 + row, gx = x0 + 4 * piece;
            const bool valid = c < C && gy < H && gx < W;
            const float* src = valid ? x + ((long long)c * H + gy) * W + gx : x;
            copy16(in + cc * kInFloats + row * kInStride + 4 * piece, src, valid ? 16 : 0);
        }
    } else {
        for (int i = tid; i < kCK * kInH * kInW; i += kThreads) {
            const int cc = i / (kInH * kInW), row = (i / kInW) % kInH, col = i % kInW;
            const int c = c0 + cc, gy = y0 + row, gx = x0 + col;
            const bool valid = c < C && gy < H && gx < W;
            copy4(in + cc * kInFloats + row * kInStride + col, valid ? x + ((long long)c * H + gy) * W + gx : x, valid);
        }
    }
    // Consecutive threads take consecutive filters m (conflict-free shared-memory writes); the
    // strided global reads are served by L1 (cp.async.ca) across the taps of one filter.
    for (int i = tid; i < kCK * kWFloats; i += kThreads) {
        const int m = i % kBM, k = i / kBM;  // k = cc * 25 + tap
        const bool valid = m0 + m < M && c0 + k / kTaps < C;
        copy4(wt + i, valid ? w + (long long)(m0 + m) * C * kTaps + (long long)c0 * kTaps + k : w, valid);
    }
}

}  // namespace tiled

extern "C" __global__ void __launch_bounds__(tiled::kThreads, TOY_MIN_BLOCKS) toy_fused_tiled(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ out, int C, int H, int W, int M, int OH, int OW, int rows16)
{
    using namespace tiled;
    float* smem = dynamic_smem;
    const int group = threadIdx.x / kPixelThreads;  // warp-uniform
    const int pixel = threadIdx.x % kPixelThreads;
    const int tx = pixel % kThreadsX, ty = pixel / kThreadsX;
    const int x0 = blockIdx.x * kTileW, y0 = blockIdx.y * kTileH;  // conv-output (= input) origin
    const int m0 = blockIdx.z * kBM;

    float acc[kRowsPerThread][kChannelsPerThread][kColsPerThread];
#pragma unroll
    for (int o = 0; o < kRowsPerThread; ++o)
#pragma unroll
        for (int m = 0; m < kChannelsPerThread; ++m)
#pragma unroll
            for (int p = 0; p < kColsPerThread; ++p) acc[o][m][p] = 0.0f;

    const int stages = (C + kCK - 1) / kCK;
    load_stage(smem, x, w, 0, m0, C, H, W, M, y0, x0, rows16);
    commit();
    for (int s = 0; s < stages; ++s) {
        if (s + 1 < stages) {  // prefetch the next stage into the other buffer
            load_stage(smem + ((s + 1) & 1) * kStageFloats, x, w, (s + 1) * kCK, m0, C, H, W, M, y0, x0, rows16);
            commit();
            wait_stages<1>();
        } else {
            wait_stages<0>();
        }
        __syncthreads();
        const float* in = smem + (s & 1) * kStageFloats;
        const float* wt = in + kCK * kInFloats + group * kChannelsPerThread;
#pragma unroll 1
        for (int cc = 0; cc < kCK; ++cc) {
            const float* in_c = in + cc * kInFloats + (kRowsPerThread * ty) * kInStride + kColsPerThread * tx;
            const float* wt_c = wt + cc * kWFloats;
#pragma unroll
            for (int kh = 0; kh < kKernelSize; ++kh) {
                float rows[kRowsPerThread][8];  // 4 outputs + 4 halo columns per row
#pragma unroll
                for (int o = 0; o < kRowsPerThread; ++o) {
                    const float4 a = *reinterpret_cast<const float4*>(in_c + (kh + o) * kInStride);
                    const float4 b = *reinterpret_cast<const float4*>(in_c + (kh + o) * kInStride + 4);
                    rows[o][0] = a.x; rows[o][1] = a.y; rows[o][2] = a.z; rows[o][3] = a.w;
                    rows[o][4] = b.x; rows[o][5] = b.y; rows[o][6] = b.z; rows[o][7] = b.w;
                }
#pragma unroll
                for (int kw = 0; kw < kKernelSize; ++kw) {
                    const float4 wa = *reinterpret_cast<const float4*>(wt_c + (kh * kKernelSize + kw) * kBM);
                    const float4 wb = *reinterpret_cast<const float4*>(wt_c + (kh * kKernelSize + kw) * kBM + 4);
                    const float wv[kChannelsPerThread] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
                    for (int o = 0; o < kRowsPerThread; ++o)
#pragma unroll
                        for (int m = 0; m < kChannelsPerThread; ++m)
#pragma unroll
                            for (int p = 0; p < kColsPerThread; ++p)
                                acc[o][m][p] = fmaf(wv[m], rows[o][p + kw], acc[o][m][p]);
                }
            }
        }
        __syncthreads();  // the next iteration's prefetch overwrites this buffer
    }

#if TOY_FUSE_POOL
    // Epilogue: max over each 2x2 window, then bias and ReLU (both monotone, so
    // max(ReLU(v + b)) = ReLU(max(v) + b)).
    const int py = y0 / kPoolStride + ty;
#pragma unroll
    for (int m = 0; m < kChannelsPerThread; ++m) {
        const int mg = m0 + group * kChannelsPerThread + m;
        if (mg >= M || py >= OH) continue;
        const float b = bias[mg];
#pragma unroll
        for (int q = 0; q < kColsPerThread / kPoolSize; ++q) {
            const int px = x0 / kPoolStride + (kColsPerThread / kPoolSize) * tx + q;
            const float v = fmaxf(fmaxf(acc[0][m][2 * q], acc[0][m][2 * q + 1]),
                                  fmaxf(acc[1][m][2 * q], acc[1][m][2 * q + 1]));
            if (px < OW) out[((long long)mg * OH + py) * OW + px] = fmaxf(v + b, 0.0f);
        }
    }
#else
    // The plain convolution (OH x OW = (H-4) x (W-4)), for bias_relu_pool to finish.
#pragma unroll
    for (int m = 0; m < kChannelsPerThread; ++m) {
        const int mg = m0 + group * kChannelsPerThread + m;
        if (mg >= M) continue;
#pragma unroll
        for (int o = 0; o < kRowsPerThread; ++o) {
            const int row = y0 + kRowsPerThread * ty + o;
#pragma unroll
            for (int p = 0; p < kColsPerThread; ++p) {
                const int col = x0 + kColsPerThread * tx + p;
                if (row < OH && col < OW) out[((long long)mg * OH + row) * OW + col] = acc[o][m][p];
            }
        }
    }
#endif
}

// The unfused layer's second step: out = 2x2 max-pool(ReLU(conv + bias)), one thread per pooled
// output, conv [M][CH][CW] -> out [M][CH/2][CW/2].
extern "C" __global__ void bias_relu_pool(
    const float* __restrict__ conv, const float* __restrict__ bias, float* __restrict__ out,
    int M, int CH, int CW, int PH, int PW)
{
    const long long total = (long long)M * PH * PW;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int pw = (int)(i % PW), ph = (int)((i / PW) % PH), m = (int)(i / ((long long)PW * PH));
        const float* row = conv + ((long long)m * CH + 2 * ph) * CW + 2 * pw;
        const float v = fmaxf(fmaxf(row[0], row[1]), fmaxf(row[CW], row[CW + 1]));
        out[i] = fmaxf(v + bias[m], 0.0f);
    }
}
