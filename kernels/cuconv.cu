// cuConv (Jorda, Valero-Lara, Pena, "cuConv: A CUDA Implementation of Convolution for CNN
// Inference", Cluster Computing 2022), and the study's steps past it.
//
// Paper design (section 3):
//   scalar_prods: one thread block per filter row along the channel axis, w[m][:][r][s], staged in
//     shared memory; each thread computes the dot product of that row with one input row
//     x[n][:][h][w] that meets it, for one output position. Consecutive threads take consecutive
//     output columns, so the NCHW reads are coalesced with no layout transform. The results are
//     R*S*N*M temporary planes of P x Q: temp[r][s][n][m][p][q] (0 where the tap falls in the padding).
//     When the positions of a filter row exceed one block, they are split across blocks (grid.x).
//   sum_planes: stage 2, out = the sum of the R*S planes. For 1x1 filters stage 1 writes the output
//     layout directly (R*S = 1) and stage 2 is skipped, as in the paper.
// Past the paper (its section 6 future work: thread- and block-level work fusion):
//   fused_tile: one kernel computes whole outputs. Each thread owns one output position and
//     CONVKIT_MT filters, accumulated in registers (thread-level fusion: each input value loaded once
//     serves MT filters); the block stages the weights of its MT filters for a tile of channels in
//     shared memory. For batch-1 layers with few outputs, blockIdx.z splits the channel reduction
//     into `splits` parts that write partial planes, which sum_planes adds (block-level parallelism
//     to fill 132 SMs instead of a handful of blocks).
//   tiled_gemm: block-level fusion carried through: the convolution as an implicit GEMM
//     (filters x positions, reduced over C*R*S) in BM x BN tiles, each thread an TM x TN register
//     tile fed by float4 reads of shared memory, the next BK-deep slice loaded into registers while
//     the current one is multiplied, and the reduction split over blockIdx.z (partial planes added
//     by sum_planes) so that batch-1 layers fill the GPU. The input is read in place (NCHW, no
//     im2col buffer); R and S are compile-time constants so the k -> (c, r, s) split is cheap.
//
// Layout: x NCHW, w MCRS, outputs NMPQ, float32, C-contiguous; FP32 FMA accumulation. Any padding
// and stride (the paper evaluates stride 1 with "same" padding). Not reproduced: the paper's exact
// block-size choices (not published); the launcher's defaults are stated there.

#ifndef CONVKIT_MT
#define CONVKIT_MT 4  // filters per thread in fused_tile (a launch knob: the launcher sets it with -D)
#endif

extern "C" __global__ void scalar_prods(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ temp,
    int N, int C, int H, int W, int M, int R, int S, int P, int Q, int pad, int stride)
{
    extern __shared__ float filter_row[];  // C floats: w[m][:][r][s]
    const int row = blockIdx.y;            // (m, r, s) flattened as m * R*S + r * S + s
    const int m = row / (R * S);
    const int rs = row % (R * S);
    const int r = rs / S, s = rs % S;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        filter_row[c] = w[((long long)m * C + c) * R * S + rs];
    __syncthreads();

    const long long positions = (long long)N * P * Q;
    const long long plane = (long long)H * W;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < positions;
         t += (long long)gridDim.x * blockDim.x) {
        const int q = (int)(t % Q);
        const int p = (int)((t / Q) % P);
        const long long n = t / ((long long)P * Q);
        const int h = p * stride + r - pad;
        const int ww = q * stride + s - pad;
        float acc = 0.0f;
        if (h >= 0 && h < H && ww >= 0 && ww < W) {
            const float* xr = x + n * C * plane + (long long)h * W + ww;
            for (int c = 0; c < C; ++c) acc = fmaf(xr[c * plane], filter_row[c], acc);
        }
        temp[(((long long)rs * N + n) * M + m) * P * Q + (long long)p * Q + q] = acc;
    }
}

#include "split_sum.cuh"  // sum_planes: stage 2, and the sum of the channel and reduction splits

// grid: x = position tiles of blockDim.x, y = ceil(M / MT) filter groups, z = channel splits.
// Dynamic shared memory: MT * channel_tile * R * S floats.
extern "C" __global__ void fused_tile(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
    int N, int C, int H, int W, int M, int R, int S, int P, int Q, int pad, int stride,
    int channels_per_split, int channel_tile)
{
    extern __shared__ float wtile[];  // [MT][channel_tile][R*S]
    const int RS = R * S;
    const int m0 = blockIdx.y * CONVKIT_MT;
    const int split = blockIdx.z;
    const int c_begin = split * channels_per_split;
    const int c_end = min(C, c_begin + channels_per_split);

    const long long positions = (long long)N * P * Q;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool active = t < positions;
    const int q = active ? (int)(t % Q) : 0;
    const int p = active ? (int)((t / Q) % P) : 0;
    const long long n = active ? t / ((long long)P * Q) : 0;
    const int h0 = p * stride - pad, w0 = q * stride - pad;
    const long long plane = (long long)H * W;
    const float* xn = x + n * C * plane;

    float acc[CONVKIT_MT];
#pragma unroll
    for (int j = 0; j < CONVKIT_MT; ++j) acc[j] = 0.0f;

    for (int c0 = c_begin; c0 < c_end; c0 += channel_tile) {
        const int tile = min(channel_tile, c_end - c0);
        __syncthreads();  // the previous tile's weights are no longer read
        for (int i = threadIdx.x; i < CONVKIT_MT * tile * RS; i += blockDim.x) {
            const int j = i / (tile * RS);
            const int rest = i % (tile * RS);  // (c - c0) * RS + rs: contiguous in w
            const int m = m0 + j;
            wtile[j * channel_tile * RS + rest] = m < M ? w[((long long)m * C + c0) * RS + rest] : 0.0f;
        }
        __syncthreads();
        if (active) {
            for (int c = 0; c < tile; ++c) {
                const float* xc = xn + (long long)(c0 + c) * plane;
                for (int r = 0; r < R; ++r) {
                    const int h = h0 + r;
                    if (h < 0 || h >= H) continue;
                    for (int s = 0; s < S; ++s) {
                        const int ww = w0 + s;
                        if (ww < 0 || ww >= W) continue;
                        const float v = xc[(long long)h * W + ww];
                        const float* wt = wtile + c * RS + r * S + s;
#pragma unroll
                        for (int j = 0; j < CONVKIT_MT; ++j) acc[j] = fmaf(v, wt[j * channel_tile * RS], acc[j]);
                    }
                }
            }
        }
    }
    if (!active) return;
    // out is y (one split) or the split's partial plane: [split][n][m][p][q]
    float* base = out + (long long)split * N * M * P * Q + (n * M) * P * Q + (long long)p * Q + q;
#pragma unroll
    for (int j = 0; j < CONVKIT_MT; ++j)
        if (m0 + j < M) base[(long long)(m0 + j) * P * Q] = acc[j];
}

// ---------------------------------------------------------------------------------------------
// tiled_gemm. Compile-time knobs (-D, set by the launcher): the block tile BM x BN (filters x
// output positions), the thread tile TM x TN, the reduction slice BK, and the filter size R x S.
#ifndef CONVKIT_BM
#define CONVKIT_BM 64
#endif
#ifndef CONVKIT_BN
#define CONVKIT_BN 64
#endif
#ifndef CONVKIT_TM
#define CONVKIT_TM 4
#endif
#ifndef CONVKIT_TN
#define CONVKIT_TN 4
#endif
#ifndef CONVKIT_BK
#define CONVKIT_BK 16  // 64 bytes of a weight row per slice; batch-1 layers have few slices to wait on
#endif
#ifndef CONVKIT_R
#define CONVKIT_R 3
#endif
#ifndef CONVKIT_S
#define CONVKIT_S 3
#endif

namespace tiled {
constexpr int BM = CONVKIT_BM, BN = CONVKIT_BN, TM = CONVKIT_TM, TN = CONVKIT_TN, BK = CONVKIT_BK;
constexpr int R = CONVKIT_R, S = CONVKIT_S, RS = R * S;
constexpr int THREADS = (BM / TM) * (BN / TN);
constexpr int A_LOADS = BM * BK / THREADS;  // weights each thread stages per slice
constexpr int B_LOADS = BN * BK / THREADS;  // input values each thread stages per slice
// blocks per SM the register cap allows: 8x8 thread tiles fit without spilling (ptxas report,
// sm_90; Turing's compiler needs one block of 256 threads per SM for the 128x128 tile)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr int MIN_BLOCKS = THREADS >= 256 ? (TM * TN >= 64 ? 1 : 2) : (THREADS >= 128 ? 3 : 4);
#else
constexpr int MIN_BLOCKS = THREADS >= 256 ? 2 : (THREADS >= 128 ? 3 : 4);
#endif
constexpr int A_PAD = 4;                    // As rows padded by 16 bytes: the transposing store is conflict-free
static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are read from shared memory as float4");
static_assert(THREADS % BK == 0 && THREADS % BN == 0, "load mapping: whole rows per pass");
static_assert(A_LOADS >= 1 && B_LOADS >= 1 && (BM * BK) % THREADS == 0 && (BN * BK) % THREADS == 0,
              "every thread loads whole elements of both tiles");
}  // namespace tiled

// grid: x = ceil(N*P*Q / BN) position tiles, y = ceil(M / BM) filter tiles, z = reduction splits
// of k_per_split (a multiple of BK). out is y (one split) or partial planes [split][n][m][p][q] that
// sum_planes adds. (On the H100, adding the partials in the tile's last block,
// which saves sum_planes' launch, was 2x slower at batch 1: that block's dependent L2 reads serialize.)
extern "C" __global__ void __launch_bounds__(tiled::THREADS, tiled::MIN_BLOCKS) tiled_gemm(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
    int N, int C, int H, int W, int M, int P, int Q, int pad, int stride, int k_per_split)
{
    using namespace tiled;
    __shared__ __align__(16) float As[BK][BM + A_PAD];  // weights, k-major: a thread's TM filters contiguous
    __shared__ __align__(16) float Bs[BK][BN];          // input columns (implicit im2col), k-major

    const int K = C * RS;
    const int PQ = P * Q;
    const long long NPQ = (long long)N * PQ;
    const int k_begin = blockIdx.z * k_per_split;
    const int k_end = min(K, k_begin + k_per_split);
    const int m0 = blockIdx.y * BM;
    const long long n0 = (long long)blockIdx.x * BN;
    const int tid = threadIdx.x;

    // What this thread stages: weights w[m0 + a_row + i*(THREADS/BK)][k0 + a_k] (reads along k, the
    // contiguous axis of w), and input values for position n0 + b_col at slice rows b_row + i*(THREADS/BN)
    // (consecutive threads, consecutive positions: coalesced NCHW reads).
    const int a_k = tid % BK, a_row = tid / BK;
    const int b_col = tid % BN, b_row = tid / BN;
    const long long pos = n0 + b_col;
    const bool pos_ok = pos < NPQ;
    const int img = pos_ok ? (int)(pos / PQ) : 0;
    const int pq = pos_ok ? (int)(pos % PQ) : 0;
    const int h0 = (pq / Q) * stride - pad, w0 = (pq % Q) * stride - pad;
    const float* x_img = x + (long long)img * C * H * W;

    float a_next[A_LOADS], b_next[B_LOADS];
    auto load_slice = [&](int k0) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int m = m0 + a_row + i * (THREADS / BK);
            const int k = k0 + a_k;
            a_next[i] = (m < M && k < k_end) ? w[(long long)m * K + k] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int k = k0 + b_row + i * (THREADS / BN);
            float v = 0.0f;
            if (pos_ok && k < k_end) {
                const int c = k / RS, rs = k % RS;  // RS is a compile-time constant: multiply and shift
                const int h = h0 + rs / S, ww = w0 + rs % S;
                if (h >= 0 && h < H && ww >= 0 && ww < W) v = x_img[((long long)c * H + h) * W + ww];
            }
            b_next[i] = v;
        }
    };

    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    load_slice(k_begin);
    for (int k0 = k_begin; k0 < k_end; k0 += BK) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) As[a_k][a_row + i * (THREADS / BK)] = a_next[i];
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) Bs[b_row + i * (THREADS / BN)][b_col] = b_next[i];
        __syncthreads();
        if (k0 + BK < k_end) load_slice(k0 + BK);  // next slice's global loads overlap this slice's FMAs
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(&a[i]) = *reinterpret_cast<const float4*>(&As[kk][ty * TM + i]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&b[j]) = *reinterpret_cast<const float4*>(&Bs[kk][tx * TN + j]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();  // the slice is consumed before the next one overwrites it
    }

    float* dst = out + (long long)blockIdx.z * N * M * PQ;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
        const long long n = n0 + tx * TN + j;
        if (n >= NPQ) break;
        const long long base = (n / PQ) * M * PQ + n % PQ;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = m0 + ty * TM + i;
            if (m < M) dst[base + (long long)m * PQ] = acc[i][j];
        }
    }
}
