// Past the papers: FP32 convolution at the SGEMM ceiling. The study's own design, after the SIMT
// SGEMM of CUTLASS (its 128x128x8 threadblock tile, 32x64 warp tile and 8x8 thread tile) carried to
// an implicit GEMM over NCHW.
//
//   implicit_gemm: Out[m][pos] = sum_k W[m][k] * X~[k][pos], with k = (c, r, s) over C*R*S and
//     pos = (n, p, q) over N*P*Q; X~ is the im2col matrix, read in place from NCHW and never
//     materialised, W the MCRS filters read in place (each row k-contiguous). A block computes a
//     BM x BN tile (filters x positions) and walks k in BK = 8 deep slices staged in shared memory
//     through a STAGES-deep cp.async pipeline (synchronous copies on Turing, which has none).
//     - Warps own 32 x 64 outputs, lanes 4 (filters) x 8 (positions), each thread an 8 x 8
//       register tile as 2 x 2 blocks of 4 x 4: per slice row a thread reads two float4s of
//       weights and two of inputs and does 64 FMAs; the eight lanes of one LDS.128 phase read
//       eight consecutive float4s of inputs (no bank conflict) and one broadcast float4 of weights.
//     - Weights are staged k-major (As[k][m]) by 4-byte copies along k (whole 32-byte sectors per
//       eight lanes), rows padded by 4 floats so the transposing stores are conflict-free.
//     - Inputs: consecutive lanes take consecutive positions (coalesced NCHW reads); each thread
//       decodes its position (image, top-left input pixel) once, and per slice only its k into
//       (c, r, s), R and S being compile-time constants. Taps in the padding are zero-filled by the
//       copy itself (cp.async with 0 source bytes). For 1x1 filters at stride 1 without padding,
//       X~ is X[n] itself: CONVKIT_VEC = 4 copies 16 bytes of consecutive positions at a time.
//     - The reduction may be split over blockIdx.z (split-K) into partial planes that sum_planes
//       adds, for layers whose tiles alone cannot fill the GPU; blockIdx.z also walks a batch of
//       independent GEMMs (the transformed points of winograd.cu), whose operands lie x_batch,
//       w_batch and out_batch floats apart.
//     - The epilogue stores float4s of four consecutive positions where P*Q allows (a multiple of 4).
//
// Layout: x NCHW and w MCRS (each under 2^31 elements: 32-bit offsets), out NMPQ or split planes
// [split][n][m][p][q] (N*P*Q under 2^31: positions are divided in 32 bits), float32, C-contiguous;
// FP32 FMA accumulation, so the result is a direct method's (within 1e-5 of float64). Any padding
// and stride. Compile-time knobs (-D, set by convkit.families.fp32.launch): CONVKIT_BM and CONVKIT_BN
// (64 or 128), CONVKIT_R, CONVKIT_S, CONVKIT_VEC (1 or 4), CONVKIT_STAGES (2..4).
#include "staging.cuh"
#include "split_sum.cuh"  // sum_planes: adds the split-K partial planes

#ifndef CONVKIT_BM
#define CONVKIT_BM 128
#endif
#ifndef CONVKIT_BN
#define CONVKIT_BN 128
#endif
#ifndef CONVKIT_R
#define CONVKIT_R 3
#endif
#ifndef CONVKIT_S
#define CONVKIT_S 3
#endif
#ifndef CONVKIT_VEC
#define CONVKIT_VEC 1
#endif
#ifndef CONVKIT_STAGES
#define CONVKIT_STAGES 3
#endif

namespace igemm {
constexpr int BM = CONVKIT_BM, BN = CONVKIT_BN, BK = 8, STAGES = CONVKIT_STAGES, VEC = CONVKIT_VEC;
constexpr int R = CONVKIT_R, S = CONVKIT_S, RS = R * S;
constexpr int WARP_M = 32, WARP_N = 64;                    // a warp's outputs: lanes 4 x 8, 8 x 8 each
constexpr int WARPS_M = BM / WARP_M, WARPS_N = BN / WARP_N;
constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int A_STRIDE = BM + 4;                           // As row: the transposing stores hit 32 banks
constexpr int STAGE_FLOATS = BK * A_STRIDE + BK * BN;      // As[BK][A_STRIDE] then Bs[BK][BN]
constexpr int A_LOADS = BM * BK / THREADS;                 // weights a thread stages per slice
// Inputs, 16-byte copies (VEC 4): threads in row-major order over the slice's BK x BN/4 float4s.
constexpr int B_COLS = BN / 4;
constexpr int B_LOADS = BN * BK / (THREADS * 4);
// Inputs, 4-byte copies (VEC 1): a warp per slice row, each lane the same BN/32 positions in every row
// (lane, lane + 32, ...), decoded once; per slice a thread decodes k -> (c, r, s) once per row it takes.
constexpr int ROWS_PER_PASS = THREADS / 32, ROW_PASSES = BK / ROWS_PER_PASS, LANE_COLS = BN / 32;
// 64 accumulators and two 8-float fragments fit 128 registers: two 256-thread blocks per SM. Smaller
// blocks stage more values per thread (more addresses live): 170 registers, 384 threads per SM.
// Turing's compiler spills at 128 registers: one 256-thread block per SM there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr int MIN_BLOCKS = THREADS >= 256 ? 1 : 384 / THREADS;
#else
constexpr int MIN_BLOCKS = THREADS >= 256 ? 2 : 384 / THREADS;
#endif
static_assert((BM == 64 || BM == 128) && (BN == 64 || BN == 128), "block tiles of 64 or 128");
static_assert(VEC == 1 || (VEC == 4 && RS == 1), "16-byte input copies need 1x1 filters");
static_assert(THREADS % BK == 0 && A_LOADS >= 1 && THREADS % B_COLS == 0 && B_LOADS >= 1 && ROW_PASSES >= 1,
              "whole slice rows per pass of the block's threads");
static_assert(STAGES >= 2 && STAGES * STAGE_FLOATS * 4 <= 48 * 1024, "static shared memory: 48 KiB");
// One bit per filter tap: 32 bits up to 5x5, 64 for 7x7.
template <bool Narrow> struct TapMaskOf { using type = unsigned; };
template <> struct TapMaskOf<false> { using type = unsigned long long; };
}  // namespace igemm

// grid: x = ceil(N*P*Q / BN) position tiles, y = ceil(M / BM) filter tiles, z = batch * splits.
// Split `z % splits` reduces k in [split * k_per_split, +k_per_split) (a multiple of BK) into
// out + split * N*M*P*Q; `z / splits` picks the GEMM of a batch.
extern "C" __global__ void __launch_bounds__(igemm::THREADS, igemm::MIN_BLOCKS) implicit_gemm(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
    int N, int C, int H, int W, int M, int P, int Q, int pad, int stride, int k_per_split, int splits,
    long long x_batch, long long w_batch, long long out_batch)
{
    using namespace igemm;
    __shared__ __align__(16) float smem[STAGES * STAGE_FLOATS];

    const int batch = blockIdx.z / splits, split = blockIdx.z % splits;
    x += batch * x_batch;
    w += batch * w_batch;
    const int K = C * RS;
    const int HW = H * W, PQ = P * Q;
    const long long NPQ = (long long)N * PQ;
    const int k_begin = split * k_per_split;
    const int k_end = min(K, k_begin + k_per_split);
    const int m0 = blockIdx.y * BM;
    const long long n0 = (long long)blockIdx.x * BN;
    const int tid = threadIdx.x;

    // Addresses are 32-bit offsets (w and x under 2^31 elements), unsigned where they become pointers (one
    // zero-extending wide multiply-add), and a copy that reads nothing points at the operand's first
    // element: per copy a select, a wide multiply-add and the copy, its predicate from precomputed bounds.
    // Weights this thread stages: w[m0 + a_m + i * THREADS / BK][k0 + a_k] for i < a_rows.
    const int a_k = tid % BK, a_m = tid / BK;
    const int a_off = (m0 + a_m) * K + a_k, a_step = (THREADS / BK) * K;
    const int a_rows = M - m0 - a_m <= 0 ? 0 : (M - m0 - a_m + THREADS / BK - 1) / (THREADS / BK);
    // Inputs, VEC 4: positions n0 + b_col .. + 3 at slice rows b_row + i * THREADS / B_COLS.
    const int b_col = (tid % B_COLS) * 4, b_row = tid / B_COLS;
    const long long pos4 = n0 + b_col;
    const bool pos4_ok = VEC == 4 && pos4 < NPQ;
    const int img4 = pos4_ok ? (int)((unsigned)pos4 / (unsigned)PQ) : 0;
    const int x_off4 = img4 * C * HW + (pos4_ok ? (int)(pos4 - (long long)img4 * PQ) : 0);
    // Inputs, VEC 1: positions n0 + lane + 32 j, as the offset of their top-left tap in x and a mask of
    // the taps (r, s) that fall inside the input (none for a position past the end). Filters of more
    // than 64 taps (AlexNet's 11x11) keep the top-left corner instead and test each tap as it loads.
    constexpr bool MASKED = RS <= 64;
    using TapMask = typename igemm::TapMaskOf<RS <= 32>::type;
    int x_off[LANE_COLS];
    TapMask inside[LANE_COLS];
    int top[LANE_COLS], left[LANE_COLS];
#pragma unroll
    for (int j = 0; j < LANE_COLS; ++j) {
        const long long p = n0 + tid % 32 + 32 * j;
        const int n = p < NPQ ? (int)((unsigned)p / (unsigned)PQ) : 0, pq = p < NPQ ? (int)(p - (long long)n * PQ) : 0;
        const int h0 = (pq / Q) * stride - pad, w0 = (pq % Q) * stride - pad;
        x_off[j] = n * C * HW + h0 * W + w0;
        top[j] = p < NPQ ? h0 : H;  // past the end: every tap outside
        left[j] = w0;
        inside[j] = 0;
        if constexpr (MASKED) {
#pragma unroll
            for (int rs = 0; rs < RS; ++rs) {
                const bool in = p < NPQ && (unsigned)(h0 + rs / S) < (unsigned)H && (unsigned)(w0 + rs % S) < (unsigned)W;
                inside[j] |= (TapMask)in << rs;
            }
        }
    }

    auto load_slice = [&](int stage, int k0) {
        float* As = smem + stage * STAGE_FLOATS;
        float* Bs = As + BK * A_STRIDE;
        const bool ka_ok = k0 + a_k < k_end;
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const bool ok = ka_ok && i < a_rows;
            copy4(&As[a_k * A_STRIDE + a_m + i * (THREADS / BK)], w + (unsigned)(ok ? a_off + i * a_step + k0 : 0), ok);
        }
        if (VEC == 4) {
#pragma unroll
            for (int i = 0; i < B_LOADS; ++i) {
                const int row = b_row + i * (THREADS / B_COLS);
                const int k = k0 + row;
                const bool ok = pos4_ok && k < k_end;
                copy16(&Bs[row * BN + b_col], x + (unsigned)(ok ? x_off4 + k * HW : 0), ok ? 16 : 0);
            }
        } else {
#pragma unroll
            for (int pass = 0; pass < ROW_PASSES; ++pass) {
                const int row = tid / 32 + pass * ROWS_PER_PASS;
                const int k = k0 + row;
                const int c = k / RS, rs = k - c * RS;  // compile-time RS and S: multiply and shift
                const int tap = c * HW + (rs / S) * W + rs % S;
                TapMask k_ok = 0;
                if constexpr (MASKED) k_ok = k < k_end ? (TapMask)1 << rs : 0;
#pragma unroll
                for (int j = 0; j < LANE_COLS; ++j) {
                    bool ok;
                    if constexpr (MASKED)
                        ok = (inside[j] & k_ok) != 0;
                    else
                        ok = k < k_end && (unsigned)(top[j] + rs / S) < (unsigned)H &&
                             (unsigned)(left[j] + rs % S) < (unsigned)W;
                    copy4(&Bs[row * BN + tid % 32 + 32 * j], x + (unsigned)(ok ? x_off[j] + tap : 0), ok);
                }
            }
        }
    };

    const int warp = tid / 32, lane = tid % 32;
    const int row0 = (warp % WARPS_M) * WARP_M + (lane / 8) * 4;  // + 16 for the second 4 x 4 block
    const int col0 = (warp / WARPS_M) * WARP_N + (lane % 8) * 4;  // + 32 likewise
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const int slices = (k_end - k_begin + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) load_slice(s, k_begin + s * BK);
        commit();
    }
    for (int it = 0; it < slices; ++it) {
        wait_stages<STAGES - 2>();  // slice `it` has landed (this thread's copies) ...
        __syncthreads();            // ... everyone's, and slice it - 1's stage is free again
        const int next = it + STAGES - 1;
        if (next < slices) load_slice(next % STAGES, k_begin + next * BK);
        commit();  // an empty group past the end keeps the count wait_stages relies on

        const float* As = smem + (it % STAGES) * STAGE_FLOATS;
        const float* Bs = As + BK * A_STRIDE;
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[kk * A_STRIDE + row0]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[kk * A_STRIDE + row0 + 16]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk * BN + col0]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk * BN + col0 + 32]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }

    float* dst = out + batch * out_batch + (long long)split * NPQ * M;
    // four consecutive positions then share an image and an aligned float4 (unless `out` itself is unaligned)
    const bool vector_store = PQ % 4 == 0 && reinterpret_cast<size_t>(dst) % 16 == 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + row0 + (i / 4) * 16 + i % 4;
        if (m >= M) continue;
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
            const long long p0 = n0 + col0 + jj * 32;
            if (vector_store) {
                if (p0 >= NPQ) continue;
                const long long n = (unsigned)p0 / (unsigned)PQ;
                float4 v = make_float4(acc[i][jj * 4], acc[i][jj * 4 + 1], acc[i][jj * 4 + 2], acc[i][jj * 4 + 3]);
                *reinterpret_cast<float4*>(&dst[(n * M + m) * PQ + (p0 - n * PQ)]) = v;
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const long long p = p0 + j;
                    if (p >= NPQ) break;
                    const long long n = (unsigned)p / (unsigned)PQ;
                    dst[(n * M + m) * PQ + (p - n * PQ)] = acc[i][jj * 4 + j];
                }
            }
        }
    }
}
