// Past the papers: Winograd's minimal filtering F(m x m, r x r) in FP32, non-fused (Lavin and Gray,
// "Fast Algorithms for Convolutional Neural Networks", CVPR 2016, section 4).
//
//   Y = AT [ (G g G^T) * (BT d BT^T) ] AT^T  for every m x m output tile, a = m + r - 1 input tile.
//
// Three launches: winograd_transforms (V = G g G^T per filter and channel, and U = BT d BT^T per channel
// and tile, in one grid), the a*a products as one batched GEMM per transformed point (implicit_gemm.cu or
// implicit_gemm_tf32x3.cu, 1x1 view: V[xi] is M x C, U[xi] is C x T; or on Hopper the split-ahead wgmma kernel,
// wgmma_tf32x3.cu's winograd_products_wgmma_tf32x3, both operands split by the transforms: TransformLayout), and
// winograd_output (Y = AT M AT^T per filter and tile).
// Layouts: V[xi][m][c], U[xi][c][t] and Mo[xi][m][t] with t over N * tiles_h * tiles_w padded to a
// multiple of 4 (t_pad: the GEMM's 16-byte copies); the padding columns of U are written as zeros.
// Each thread holds one a x a tile in registers; the transforms are unrolled products with the
// matrices as compile-time constants (convkit.families.fp32.winograd builds them), so zeros and ones
// cost nothing. Stride 1, any padding. The products are FP32, the transforms add rounding of their
// own: the error is a transform method's, judged by the looser bar like cuDNN's Winograd and FFT.
// Compile-time knobs (-D): CONVKIT_WG_M and CONVKIT_WG_R, one of the tiles below.

#include "tf32_split.cuh"  // tf32::split_ahead: V (and for wgmma U) split for the 3xTF32 products
#include "wgmma_operands.cuh"  // the split-ahead wgmma kernel's layouts, which WGMMA writes

#ifndef CONVKIT_WG_M
#define CONVKIT_WG_M 2
#endif
#ifndef CONVKIT_WG_R
#define CONVKIT_WG_R 3
#endif

// The matrices of every tile convkit runs, as convkit.families.fp32.winograd.matrices computes them
// (a CPU test keeps the two equal).
#if CONVKIT_WG_M == 2 && CONVKIT_WG_R == 3
#define WG_AT {{1.0f, 1.0f, 1.0f, 0.0f}, {0.0f, 1.0f, -1.0f, 1.0f}}
#define WG_G {{1.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0.0f, 0.0f, 1.0f}}
#define WG_BT {{1.0f, 0.0f, -1.0f, 0.0f}, {0.0f, 1.0f, 1.0f, 0.0f}, {0.0f, -1.0f, 1.0f, 0.0f}, {0.0f, -1.0f, 0.0f, 1.0f}}
#elif CONVKIT_WG_M == 4 && CONVKIT_WG_R == 3
#define WG_AT {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f}, {0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.0f}, {0.0f, 1.0f, 1.0f, 4.0f, 4.0f, 0.0f}, {0.0f, 1.0f, -1.0f, 8.0f, -8.0f, 1.0f}}
#define WG_G {{0.25f, 0.0f, 0.0f}, {0.1666666716337204f, 0.1666666716337204f, 0.1666666716337204f}, {0.1666666716337204f, -0.1666666716337204f, 0.1666666716337204f}, {0.0416666679084301f, 0.0833333358168602f, 0.1666666716337204f}, {0.0416666679084301f, -0.0833333358168602f, 0.1666666716337204f}, {0.0f, 0.0f, 1.0f}}
#define WG_BT {{4.0f, 0.0f, -5.0f, 0.0f, 1.0f, 0.0f}, {0.0f, 4.0f, 4.0f, -1.0f, -1.0f, 0.0f}, {0.0f, -4.0f, 4.0f, 1.0f, -1.0f, 0.0f}, {0.0f, -2.0f, -1.0f, 2.0f, 1.0f, 0.0f}, {0.0f, 2.0f, -1.0f, -2.0f, 1.0f, 0.0f}, {0.0f, 4.0f, 0.0f, -5.0f, 0.0f, 1.0f}}
#elif CONVKIT_WG_M == 6 && CONVKIT_WG_R == 3
#define WG_AT {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f}, {0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f, 0.0f}, {0.0f, 1.0f, 1.0f, 4.0f, 4.0f, 0.25f, 0.25f, 0.0f}, {0.0f, 1.0f, -1.0f, 8.0f, -8.0f, 0.125f, -0.125f, 0.0f}, {0.0f, 1.0f, 1.0f, 16.0f, 16.0f, 0.0625f, 0.0625f, 0.0f}, {0.0f, 1.0f, -1.0f, 32.0f, -32.0f, 0.03125f, -0.03125f, 1.0f}}
#define WG_G {{0.25f, 0.0f, 0.0f}, {0.0555555559694767f, 0.0555555559694767f, 0.0555555559694767f}, {0.0555555559694767f, -0.0555555559694767f, 0.0555555559694767f}, {0.0027777778450399637f, 0.0055555556900799274f, 0.011111111380159855f}, {0.0027777778450399637f, -0.0055555556900799274f, 0.011111111380159855f}, {0.02222222276031971f, 0.011111111380159855f, 0.0055555556900799274f}, {0.02222222276031971f, -0.011111111380159855f, 0.0055555556900799274f}, {0.0f, 0.0f, 0.25f}}
#define WG_BT {{4.0f, 0.0f, -21.0f, 0.0f, 21.0f, 0.0f, -4.0f, 0.0f}, {0.0f, -4.0f, -4.0f, 17.0f, 17.0f, -4.0f, -4.0f, 0.0f}, {0.0f, 4.0f, -4.0f, -17.0f, 17.0f, 4.0f, -4.0f, 0.0f}, {0.0f, 2.0f, 1.0f, -10.0f, -5.0f, 8.0f, 4.0f, 0.0f}, {0.0f, -2.0f, 1.0f, 10.0f, -5.0f, -8.0f, 4.0f, 0.0f}, {0.0f, 64.0f, 128.0f, -80.0f, -160.0f, 16.0f, 32.0f, 0.0f}, {0.0f, -64.0f, 128.0f, 80.0f, -160.0f, -16.0f, 32.0f, 0.0f}, {0.0f, -4.0f, 0.0f, 21.0f, 0.0f, -21.0f, 0.0f, 4.0f}}
#elif CONVKIT_WG_M == 2 && CONVKIT_WG_R == 5
#define WG_AT {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f}, {0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 1.0f}}
#define WG_G {{0.25f, 0.0f, 0.0f, 0.0f, 0.0f}, {0.1666666716337204f, 0.1666666716337204f, 0.1666666716337204f, 0.1666666716337204f, 0.1666666716337204f}, {0.1666666716337204f, -0.1666666716337204f, 0.1666666716337204f, -0.1666666716337204f, 0.1666666716337204f}, {0.0416666679084301f, 0.0833333358168602f, 0.1666666716337204f, 0.3333333432674408f, 0.6666666865348816f}, {0.0416666679084301f, -0.0833333358168602f, 0.1666666716337204f, -0.3333333432674408f, 0.6666666865348816f}, {0.0f, 0.0f, 0.0f, 0.0f, 1.0f}}
#define WG_BT {{4.0f, 0.0f, -5.0f, 0.0f, 1.0f, 0.0f}, {0.0f, 4.0f, 4.0f, -1.0f, -1.0f, 0.0f}, {0.0f, -4.0f, 4.0f, 1.0f, -1.0f, 0.0f}, {0.0f, -2.0f, -1.0f, 2.0f, 1.0f, 0.0f}, {0.0f, 2.0f, -1.0f, -2.0f, 1.0f, 0.0f}, {0.0f, 4.0f, 0.0f, -5.0f, 0.0f, 1.0f}}
#elif CONVKIT_WG_M == 4 && CONVKIT_WG_R == 5
#define WG_AT {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f}, {0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f, 0.0f}, {0.0f, 1.0f, 1.0f, 4.0f, 4.0f, 0.25f, 0.25f, 0.0f}, {0.0f, 1.0f, -1.0f, 8.0f, -8.0f, 0.125f, -0.125f, 1.0f}}
#define WG_G {{0.25f, 0.0f, 0.0f, 0.0f, 0.0f}, {0.0555555559694767f, 0.0555555559694767f, 0.0555555559694767f, 0.0555555559694767f, 0.0555555559694767f}, {0.0555555559694767f, -0.0555555559694767f, 0.0555555559694767f, -0.0555555559694767f, 0.0555555559694767f}, {0.0027777778450399637f, 0.0055555556900799274f, 0.011111111380159855f, 0.02222222276031971f, 0.04444444552063942f}, {0.0027777778450399637f, -0.0055555556900799274f, 0.011111111380159855f, -0.02222222276031971f, 0.04444444552063942f}, {0.02222222276031971f, 0.011111111380159855f, 0.0055555556900799274f, 0.0027777778450399637f, 0.0013888889225199819f}, {0.02222222276031971f, -0.011111111380159855f, 0.0055555556900799274f, -0.0027777778450399637f, 0.0013888889225199819f}, {0.0f, 0.0f, 0.0f, 0.0f, 0.25f}}
#define WG_BT {{4.0f, 0.0f, -21.0f, 0.0f, 21.0f, 0.0f, -4.0f, 0.0f}, {0.0f, -4.0f, -4.0f, 17.0f, 17.0f, -4.0f, -4.0f, 0.0f}, {0.0f, 4.0f, -4.0f, -17.0f, 17.0f, 4.0f, -4.0f, 0.0f}, {0.0f, 2.0f, 1.0f, -10.0f, -5.0f, 8.0f, 4.0f, 0.0f}, {0.0f, -2.0f, 1.0f, 10.0f, -5.0f, -8.0f, 4.0f, 0.0f}, {0.0f, 64.0f, 128.0f, -80.0f, -160.0f, 16.0f, 32.0f, 0.0f}, {0.0f, -64.0f, 128.0f, 80.0f, -160.0f, -16.0f, 32.0f, 0.0f}, {0.0f, -4.0f, 0.0f, 21.0f, 0.0f, -21.0f, 0.0f, 4.0f}}
#else
#error "no transform matrices for this F(m, r): see convkit.families.fp32.winograd.TILES"
#endif

namespace wg {
constexpr int M = CONVKIT_WG_M, R = CONVKIT_WG_R, A = M + R - 1, POINTS = A * A;

// out (rows x cols) = L (rows x K) . X (K x cols), unrolled; L's zeros cost nothing.
template <int ROWS, int K, int COLS>
__device__ __forceinline__ void left(const float (&l)[ROWS][K], const float (&x)[K][COLS], float (&out)[ROWS][COLS])
{
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int j = 0; j < COLS; ++j) {
            float v = 0.0f;
#pragma unroll
            for (int k = 0; k < K; ++k)
                if (l[i][k] != 0.0f) v = fmaf(l[i][k], x[k][j], v);
            out[i][j] = v;
        }
}

// out (rows x cols) = X . L^T: the transpose of L . X^T (transposes of unrolled arrays are free).
template <int ROWS, int K, int COLS>
__device__ __forceinline__ void right(const float (&x)[ROWS][K], const float (&l)[COLS][K], float (&out)[ROWS][COLS])
{
    float xt[K][ROWS], outt[COLS][ROWS];
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int k = 0; k < K; ++k) xt[k][i] = x[i][k];
    left(l, xt, outt);
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int j = 0; j < COLS; ++j) out[i][j] = outt[j][i];
}
}  // namespace wg

// The filter transform of one (m, c): out = G g G^T for g = w[m][c].
__device__ __forceinline__ void filter_tile(const float* __restrict__ w, long long i, float (&out)[wg::A][wg::A])
{
    using namespace wg;
    constexpr float G[A][R] = WG_G;
    float g[R][R], gg[A][R];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int s = 0; s < R; ++s) g[r][s] = w[i * R * R + r * R + s];
    left(G, g, gg);
    right(gg, G, out);
}

// How winograd_transforms lays V and U out for the products (the `layout` argument): for the FP32 implicit GEMM and
// the 3xTF32 one (PLAIN: V[xi][m][c], U[xi][c][t]); for the 3xTF32 one reading V split ahead (FILTERS_SPLIT: the
// big parts' planes Vb[xi][m][c] then the small parts' Vs[xi][m][c], rows of CP = C rounded up to whole float4s,
// zero-padded; U as PLAIN); for the split-ahead wgmma kernel (WGMMA, wgmma_tf32x3.cu's winograd_products_wgmma_tf32x3:
// V[xi] split into that kernel's tiled weights, U[xi] split into its channels-last input planes; WGMMA_FP32_INPUTS:
// V as WGMMA, U[xi] one channels-last FP32 plane, which that kernel built with CONVKIT_WS_INPUTS_FP32 splits as it
// stages it).
enum TransformLayout { PLAIN = 0, FILTERS_SPLIT = 1, WGMMA = 2, WGMMA_FP32_INPUTS = 3 };


// V[xi][m][c] = (G g G^T)[xi] for g = w[m][c] (i = m * C + c); with FILTERS_SPLIT, i = m * CP + c and the big and
// small planes (see TransformLayout).
__device__ __forceinline__ void filter_item(const float* __restrict__ w, float* __restrict__ v, int M_filters, int C,
                                            bool split, int i)
{
    using namespace wg;
    const int row = split ? (C + 3) / 4 * 4 : C;
    const int m = i / row, c = i - m * row;
    float out[A][A] = {};
    if (c < C) filter_tile(w, (long long)m * C + c, out);
    const long long point = (long long)M_filters * row, plane = POINTS * point;
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
        for (int b = 0; b < A; ++b) {
            if (split) {
                float big, small;
                tf32::split_ahead(out[a][b], big, small);
                v[(a * A + b) * point + i] = big;
                v[plane + (a * A + b) * point + i] = small;
            } else {
                v[(a * A + b) * point + i] = out[a][b];
            }
        }
}

// With WGMMA: item i is the i-th float of a point's tiled weights' big planes (wgmma_operands::tiled_line, blocks of
// WINOGRAD_FILTERS filters), so that consecutive threads write consecutive floats of each point; zeros past M and C.
__device__ __forceinline__ void filter_item_tiled(const float* __restrict__ w, float* __restrict__ v, int M_filters,
                                                  int C, long long i)
{
    using namespace wg;
    using namespace wgmma_operands;
    constexpr int FILTERS = WINOGRAD_FILTERS, PLANE = FILTERS * CHANNELS;
    const int j = (int)(i % 4), row = (int)(i / 4 % FILTERS), kgroup = (int)(i / (4 * FILTERS) % (CHANNELS / 4));
    const long long tile_of = i / PLANE, tiles = padded_channels(C) / CHANNELS;  // m-block * tiles + K-tile
    const int m = (int)(tile_of / tiles) * FILTERS + row, c = (int)(tile_of % tiles) * CHANNELS + 4 * kgroup + j;
    float out[A][A] = {};
    if (m < M_filters && c < C) filter_tile(w, (long long)m * C + c, out);
    const long long at = tiled_line(tile_of, kgroup, row, FILTERS) + j;
    const long long point = (long long)(M_filters + FILTERS - 1) / FILTERS * tiles * 2 * PLANE;
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
        for (int b = 0; b < A; ++b) {
            float big, small;
            tf32::split_ahead(out[a][b], big, small);
            v[(a * A + b) * point + at] = big;
            v[(a * A + b) * point + at + PLANE] = small;
        }
}

// BT d BT^T: an input tile's transform.
__device__ __forceinline__ void input_transform(const float (&d)[wg::A][wg::A], float (&out)[wg::A][wg::A])
{
    using namespace wg;
    constexpr float BT[A][A] = WG_BT;
    float bd[A][A];
    left(BT, d, bd);
    right(bd, BT, out);
}

// (BT d BT^T) for the a x a input tile d of channel c under output tile t (zero outside the input, and for t >= T or
// c >= C).
__device__ __forceinline__ void input_tile(const float* __restrict__ x, int C, int H, int W, int pad, int tiles_h,
                                           int tiles_w, int T, int t, int c, float (&out)[wg::A][wg::A])
{
    using namespace wg;
    float d[A][A];
    if (t < T && c < C) {
        const int per_image = tiles_h * tiles_w;
        const int n = t / per_image, rest = t - n * per_image;
        const int h0 = (rest / tiles_w) * M - pad, w0 = (rest % tiles_w) * M - pad;
        const float* plane = x + ((long long)n * C + c) * H * W;
#pragma unroll
        for (int a = 0; a < A; ++a)
#pragma unroll
            for (int b = 0; b < A; ++b) {
                const int h = h0 + a, ww = w0 + b;
                d[a][b] = ((unsigned)h < (unsigned)H && (unsigned)ww < (unsigned)W) ? plane[h * W + ww] : 0.0f;
            }
    } else {
#pragma unroll
        for (int a = 0; a < A; ++a)
#pragma unroll
            for (int b = 0; b < A; ++b) d[a][b] = 0.0f;
    }
    input_transform(d, out);
}

// U[xi][c][t] = (BT d BT^T)[xi] for channel c under output tile t (t in [T, t_pad) written as 0).
__device__ __forceinline__ void input_item(const float* __restrict__ x, float* __restrict__ u, int C, int H, int W,
                                           int pad, int tiles_h, int tiles_w, int T, int t_pad, int t, int c)
{
    using namespace wg;
    float out[A][A];
    input_tile(x, C, H, W, pad, tiles_h, tiles_w, T, t, c, out);
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
        for (int b = 0; b < A; ++b) u[((long long)(a * A + b) * C + c) * t_pad + t] = out[a][b];
}

// With WGMMA, a block of 256 threads turns 8 tiles by 32 channels of U into the split-ahead kernel's input planes
// (U[xi] as [2][t_pad][CP], big then small, zeros past C and T; with WGMMA_FP32_INPUTS, not `split`, one FP32 plane
// [t_pad][CP]), through shared memory: each thread transforms the tile of lane % 8 under channel 4 * warp + lane / 8
// (a warp's loads run along 8 neighbouring tiles of 4 channels), then the block writes each point's 8 tiles by 32
// channels split, a float4 a thread: every store of a warp four whole 128-byte lines of each plane. (32 tiles by 8
// channels, a float a thread, wrote 32-byte pieces: four lines a store for a quarter of the bytes, 111.2 us against
// 92.3 now on 56-16-3-256-256 at F(4x4, 3x3), H200, 2026-11-28; before it, a thread a channel and tile, channels
// fastest, read 32 planes a load: 2.5x slower than 32 by 8.) Each thread reads its own a x a window: Nsight Compute
// calls those loads uncoalesced (a warp's load takes 4-5 sectors of each of 4 channels for 32 floats), but the
// neighbouring windows overlap in L1 and every load of the window is in flight at once. Loading the block's windows
// along the input's rows into shared memory first was slower: 95.0 against 57.9 us (inputs split staged) and 108.9
// against 92.3 (split ahead) on 56-16-3-256-256 at F(4x4, 3x3), H200, 2026-11-29.
namespace wgmma_inputs {
constexpr int TILES = 8, CHANNEL_STEP = 32, THREADS = TILES * CHANNEL_STEP;
constexpr int ROW = CHANNEL_STEP + 4;  // a tile's channels in shared memory: +4 keeps the float4s aligned and a
                                       // warp's scattered writes (8 tiles by 4 channels) on 32 banks
constexpr int CHUNK = wg::POINTS <= 36 ? wg::POINTS : 32;  // points through shared memory at a time
}  // namespace wgmma_inputs

__device__ __forceinline__ void input_block(const float* __restrict__ x, float* __restrict__ u, int C, int H, int W,
                                            int pad, int tiles_h, int tiles_w, int T, int t_pad, long long block,
                                            bool split)
{
    using namespace wg;
    using namespace wgmma_inputs;
    using wgmma_operands::padded_channels;
    // [point][tile][channel], dynamic, so that the other layouts' launches hold none (WgmmaWinogradLaunch gives its
    // size)
    extern __shared__ __align__(16) float staged[];
    auto values = reinterpret_cast<float (*)[TILES][ROW]>(staged);
    const int CP = padded_channels(C), channel_blocks = CP / CHANNEL_STEP;
    const int t0 = (int)(block / channel_blocks) * TILES, c0 = (int)(block % channel_blocks) * CHANNEL_STEP;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int my_tile = lane % TILES, my_channel = 4 * warp + lane / TILES;
    float out[A][A];
    input_tile(x, C, H, W, pad, tiles_h, tiles_w, T, t0 + my_tile, c0 + my_channel, out);
    const long long plane = (long long)t_pad * CP;
    // the writing side: a float4 of 4 channels (8 a tile's line), 8 tiles, 4 points a pass of the block
    constexpr int QUADS = CHANNEL_STEP / 4, PER_POINT = TILES * QUADS, POINTS_A_PASS = THREADS / PER_POINT;
    static_assert(CHUNK % POINTS_A_PASS == 0, "a chunk's points in whole passes: `to` steps on by passes");
    const int quad = threadIdx.x % QUADS, tile = threadIdx.x / QUADS % TILES, point_of = threadIdx.x / PER_POINT;
    const int planes = split ? 2 : 1;  // a point's planes
    const long long plane4 = plane / 4, pass4 = planes * plane4 * POINTS_A_PASS;  // float4s to the next pass's point
    float4* to = reinterpret_cast<float4*>(u + (long long)(t0 + tile) * CP + c0) + quad + point_of * planes * plane4;
#pragma unroll
    for (int first = 0; first < POINTS; first += CHUNK) {
        __syncthreads();  // the values before are written out
#pragma unroll
        for (int point = first; point < first + CHUNK && point < POINTS; ++point)
            values[point - first][my_tile][my_channel] = out[point / A][point % A];
        __syncthreads();
        if (t0 + tile < t_pad) {
#pragma unroll 4
            for (int pass = 0; pass < CHUNK; pass += POINTS_A_PASS, to += pass4) {
                const int point = first + pass + point_of;
                if (point >= POINTS) break;  // (the last chunk's last pass: its points past the last)
                const float4 v = reinterpret_cast<const float4*>(values[point - first][tile])[quad];
                if (split) {
                    tf32::split_ahead(v, to[0], to[plane4]);
                } else {
                    to[0] = v;  // split as staged (wgmma_tf32x3.cu's split_inputs)
                }
            }
        }
    }
}

// Both transforms in one launch (a launch fewer for the op's host to issue): the first `filters` items are the
// filter transform's (filter_item: M * C, or M * CP split; with WGMMA filter_item_tiled, a point's tiled weights'
// big planes; 0 on a pass of images after the first, V being made), the rest the input transform's (input_item:
// C * t_pad, t fastest, coalesced along the tiles; with WGMMA input_block, a block's 256 items each, over CP x t_pad
// rounded up to 8 tiles). Grid-stride (with WGMMA by whole blocks of 256 threads). `layout`: a TransformLayout.
extern "C" __global__ void winograd_transforms(
    const float* __restrict__ w, float* __restrict__ v, const float* __restrict__ x, float* __restrict__ u,
    int M_filters, int C, int H, int W, int pad, int tiles_h, int tiles_w, int T, int t_pad, long long filters,
    int layout)
{
    if (layout == WGMMA || layout == WGMMA_FP32_INPUTS) {
        using namespace wgmma_inputs;
        using wgmma_operands::padded_channels;
        if (blockDim.x != THREADS) __trap();  // the input blocks' shape: the launch gives it
        const long long filter_blocks = filters / THREADS;  // a multiple of 4,096 items (a K-tile's plane)
        const long long blocks =
            filter_blocks + (long long)(t_pad + TILES - 1) / TILES * (padded_channels(C) / CHANNEL_STEP);
        for (long long b = blockIdx.x; b < blocks; b += gridDim.x) {  // whole blocks: a barrier per input block
            if (b < filter_blocks)
                filter_item_tiled(w, v, M_filters, C, b * THREADS + threadIdx.x);
            else
                input_block(x, u, C, H, W, pad, tiles_h, tiles_w, T, t_pad, b - filter_blocks, layout == WGMMA);
        }
        return;
    }
    const long long inputs = (long long)C * t_pad, items = filters + inputs;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < items;
         i += (long long)gridDim.x * blockDim.x) {
        if (i < filters) {
            filter_item(w, v, M_filters, C, layout == FILTERS_SPLIT, (int)i);
        } else {
            const long long j = i - filters;
            const int c = (int)(j / t_pad);
            input_item(x, u, C, H, W, pad, tiles_h, tiles_w, T, t_pad, (int)(j - (long long)c * t_pad), c);
        }
    }
}

// y[n][m][.][.] = (AT Mo AT^T) over the products Mo[xi][m][t] of output tile t, clipped to P x Q.
// grid: x over T, y = M (filters). bias[m] is added where given (convkit.conv2d's; null otherwise).
// The block's tiles go out through shared memory (dynamic: WinogradLaunch.output_shared_bytes), row by row of each
// tile, so that a warp's stores run along an output row: a thread a tile storing its own M floats of a row wrote
// every sector of M-float strides, 4-6x the bytes between L1 and L2 (63.9 us against 49.7 now at F(4x4, 3x3), 95.0
// against 62.5 at F(6x6, 3x3), on 56-16-3-256-256, H200, 2026-11-28).
extern "C" __global__ void winograd_output(
    const float* __restrict__ mo, float* __restrict__ y, int M_filters, int P, int Q, int tiles_h, int tiles_w,
    int T, int t_pad, const float* __restrict__ bias)
{
    using namespace wg;
    constexpr float AT[M][A] = WG_AT;
    extern __shared__ __align__(16) float rows[];  // [M][threads * M]
    const int threads = blockDim.x, width = threads * M;  // a row of the block's tiles: M floats a tile
    long long* tile_at = reinterpret_cast<long long*>(rows + M * width);  // where a tile's first float goes in y
    int* tile_rows = reinterpret_cast<int*>(tile_at + threads);            // its rows and columns inside P x Q
    int* tile_cols = tile_rows + threads;
    const int t = blockIdx.x * threads + threadIdx.x;
    const int m = blockIdx.y;
    tile_rows[threadIdx.x] = 0;  // past T: nothing stored
    if (t < T) {
        float prod[A][A];
#pragma unroll
        for (int a = 0; a < A; ++a)
#pragma unroll
            for (int b = 0; b < A; ++b) prod[a][b] = mo[((long long)(a * A + b) * M_filters + m) * t_pad + t];
        float ap[M][A], out[M][M];
        left(AT, prod, ap);
        right(ap, AT, out);
        const float b = bias ? __ldg(bias + m) : 0.0f;
#pragma unroll
        for (int i = 0; i < M; ++i)
#pragma unroll
            for (int j = 0; j < M; ++j) rows[i * width + threadIdx.x * M + j] = out[i][j] + b;
        const int per_image = tiles_h * tiles_w;
        const int n = t / per_image, rest = t - n * per_image;
        const int p0 = (rest / tiles_w) * M, q0 = (rest % tiles_w) * M;
        tile_at[threadIdx.x] = (((long long)n * M_filters + m) * P + p0) * Q + q0;
        tile_rows[threadIdx.x] = min(M, P - p0);
        tile_cols[threadIdx.x] = min(M, Q - q0);
    }
    __syncthreads();
    // A thread's M columns k of the block's rows (neighbours along a row), each looked up once, then stored down the
    // M rows: a warp's store runs along an output row.
#pragma unroll
    for (int column = 0; column < M; ++column) {
        const int k = threadIdx.x + column * threads, tile = k / M, j = k - tile * M;
        if (j >= tile_cols[tile]) continue;
        const int stored_rows = tile_rows[tile];
        float* to = y + tile_at[tile] + j;
#pragma unroll
        for (int i = 0; i < M; ++i)
            if (i < stored_rows) to[(long long)i * Q] = rows[i * width + k];
    }
}
