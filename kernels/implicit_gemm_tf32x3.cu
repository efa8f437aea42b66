// FP32 accuracy on tensor cores: the implicit GEMM of implicit_gemm.cu in 3xTF32, the "fast accurate
// FP32" of CUTLASS (its OpMultiplyAddFastF32, examples 27 and 28 of NVIDIA/cutlass) carried to an implicit
// GEMM over NCHW, with the error analysis and the accumulation outside the tensor cores of Ootomo & Yokota
// 2022 (arXiv 2203.03341).
//
//   implicit_gemm_tf32x3: Out[m][pos] = sum_k W[m][k] * X~[k][pos], as implicit_gemm.cu (the operands
//     staged by im2col_slices.cuh, a STAGES-deep cp.async pipeline of BK = 16 deep slices, split-K over
//     blockIdx.z, a batch of GEMMs x_batch, w_batch and out_batch floats apart), its products on
//     mma.sync.m16n8k8 TF32 (sm_80 and later).
//     - The split: each operand a = big + small with big = tf32(a), rounded to nearest, and small the
//       rest (a - big, exact in FP32; the tensor core truncates it to TF32). A product is
//       big*big + big*small + small*big; small*small, about 2^-22 of it, is dropped, as CUTLASS does.
//       Each fragment is split once in registers after its shared-memory load, not once per product.
//     - The accumulation: per 16-deep slice the tensor cores sum the small products first, then the big
//       one, from zero (two k-steps of m16n8k8); the slice's sum is then added to an FP32 accumulator by
//       an FADD, which rounds to nearest. The tensor cores' own accumulation truncates, so a running sum
//       kept inside them over all of K drifts (measured on the H100 at K = 4608: 3.2e-5 from float64,
//       against 3.3e-7 with slice sums); kept outside, only a slice's sum truncates.
//     - Warps own 32 x 64 outputs (2 x 8 tiles of m16n8; WARP_M 64: 64 x 32, 4 x 4 tiles, as CUTLASS's
//       fastest 3xTF32 tiles have them), 64 accumulators a thread as implicit_gemm.cu. Staged rows are
//       padded by 8 floats (strides = 8 mod 32 banks), so each fragment load (lanes (g, t) reading row t,
//       column g) hits 32 distinct banks.
//     - PRESPLIT: the weights come split already (split_weights_tf32x3 once per call, or Winograd's filter
//       transform, by the same rule), the big planes of the batch's GEMMs then the small ones, rows padded
//       to whole float4s; both are staged by
//       16-byte copies, and only the inputs are split in the loop. With 64 x 32 warps that removes two
//       thirds of the loop's splits.
//     - FLUSH: slices summed in the tensor cores before the FP32 add (1, or 2: half the adds, each sum
//       truncated over 32 products instead of 16).
//
// Layout: x NCHW and w MCRS (each under 2^31 elements), out NMPQ or split planes [split][n][m][p][q],
// float32, C-contiguous. Compile-time knobs (-D, set by convkit.families.tf32x3.launch): CONVKIT_BM and
// CONVKIT_BN (64 or 128), CONVKIT_R, CONVKIT_S, CONVKIT_VEC (1 or 4), CONVKIT_STAGES (2..5), CONVKIT_WARP_M
// (32 or 64), CONVKIT_PRESPLIT (0 or 1), CONVKIT_FLUSH (1 or 2); dynamic shared memory STAGES *
// STAGE_FLOATS * 4 bytes.
#include "staging.cuh"
#include "im2col_slices.cuh"  // im2col::Slices: a slice of both operands into shared memory
#include "split_sum.cuh"      // sum_planes: adds the split-K partial planes
#include "tf32_split.cuh"     // tf32::split: a value into its big and small TF32 parts

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
#ifndef CONVKIT_WARP_M
#define CONVKIT_WARP_M 32
#endif
#ifndef CONVKIT_PRESPLIT
#define CONVKIT_PRESPLIT 0
#endif
#ifndef CONVKIT_FLUSH
#define CONVKIT_FLUSH 1
#endif
#ifndef CONVKIT_COPIES_FIRST  // 1: the next slice's copies issued before the slice's products (scripts/tf32x3_issue.py)
#define CONVKIT_COPIES_FIRST 0
#endif

namespace tf32x3 {
constexpr int BM = CONVKIT_BM, BN = CONVKIT_BN, BK = 16, STAGES = CONVKIT_STAGES, VEC = CONVKIT_VEC;
constexpr int R = CONVKIT_R, S = CONVKIT_S;
constexpr int WARP_M = CONVKIT_WARP_M, WARP_N = 2048 / WARP_M;  // a warp's outputs: MT x NT tiles of m16n8
constexpr bool PRESPLIT = CONVKIT_PRESPLIT;
constexpr int FLUSH = CONVKIT_FLUSH;
constexpr int MT = WARP_M / 16, NT = WARP_N / 8;
constexpr int WARPS_M = BM / WARP_M, WARPS_N = BN / WARP_N;
constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int A_STRIDE = BM + 8, B_STRIDE = BN + 8;  // 8 mod 32 banks: conflict-free fragment loads
// PRESPLIT: both weight planes staged filter-major (As[m][k], rows SPLIT_STRIDE floats apart: 20 = 20 mod 32
// banks, so the lanes (g, t) reading row g, column t hit 32 distinct banks) by 16-byte copies.
constexpr int SPLIT_STRIDE = BK + 4;
constexpr int A_FLOATS = PRESPLIT ? 2 * BM * SPLIT_STRIDE : BK * A_STRIDE;
constexpr int STAGE_FLOATS = A_FLOATS + BK * B_STRIDE;
// a slice's own sums double the accumulators (about 205 registers): one 256-thread block per SM
constexpr int MIN_BLOCKS = 256 / THREADS;
static_assert((BM == 64 || BM == 128) && (BN == 64 || BN == 128), "block tiles of 64 or 128");
static_assert(STAGES >= 2 && STAGES <= 5, "2 to 5 pipeline stages");
static_assert((WARP_M == 32 || WARP_M == 64) && BM % WARP_M == 0 && BN % WARP_N == 0, "warps of 32x64 or 64x32");
static_assert(FLUSH == 1 || FLUSH == 2, "slice sums added every slice or every second one");

using tf32::split;

// A warp's MT x NT tiles of m16n8 sums, four floats a thread each.
using Tiles = float[MT][NT][4];

__device__ __forceinline__ void zero(Tiles& tiles)
{
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) tiles[i][j][v] = 0.0f;
}

// d += a * b on one m16n8k8 TF32 tile (FP32 accumulation in the tensor core).
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2])
{
#if defined(CONVKIT_EMULATED_MMA)
    CONVKIT_EMULATED_MMA(d, a, b);  // tests/cuda_emulator: the warp's product computed on the CPU
#elif __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// A 16 x 8 fragment of 32-bit words from a filter-major tile (rows 16 bytes apart at least, 16-byte aligned) in one
// ldmatrix.x4: lane l names row l % 16 at column 4 (l / 16); r gets (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4),
// the m16n8k8 A fragment's order (each 8 x 8 b16 matrix is 8 x 4 words: lane 4 g + t gets word t of row g).
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const float* row)
{
#if defined(CONVKIT_EMULATED_LDMATRIX_X4)
    CONVKIT_EMULATED_LDMATRIX_X4(r, row);  // tests/cuda_emulator
#elif __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
#endif
}

// PRESPLIT: a slice of the weights split ahead, BM filters x BK, from a plane of rows KP floats apart (C*R*S
// rounded up to whole float4s, zero-padded: every 16-byte copy is aligned and reads inside the plane).
struct SplitSlices {
    static constexpr int CHUNKS = BM * BK / 4, LOADS = CHUNKS / THREADS;
    static_assert(CHUNKS % THREADS == 0, "whole float4s of the weights per thread");
    int row0, kc, KP, rows;  // this thread's first filter row, float4 column; the plane's row stride; filters left

    __device__ __forceinline__ SplitSlices(int M, int K, int m0, int tid)
        : row0(tid / (BK / 4)), kc(tid % (BK / 4)), KP((K + 3) / 4 * 4), rows(M - m0) {}

    // The big and the small parts' slices k0 .. k0 + BK of filters m0 ..; `big` is the big plane at m0.
    __device__ __forceinline__ void load(float* As, const float* big, long long plane, int k0, int k_end) const
    {
        const bool k_ok = k0 + 4 * kc < k_end;
#pragma unroll
        for (int i = 0; i < LOADS; ++i) {
            const int row = row0 + i * (THREADS / (BK / 4));
            const bool ok = k_ok && row < rows;
            const float* from = big + (ok ? (long long)row * KP + k0 + 4 * kc : 0);
            copy16(&As[row * SPLIT_STRIDE + 4 * kc], from, ok ? 16 : 0);
            copy16(&As[BM * SPLIT_STRIDE + row * SPLIT_STRIDE + 4 * kc], from + (ok ? plane : 0), ok ? 16 : 0);
        }
    }
};
}  // namespace tf32x3

// grid: x = ceil(N*P*Q / BN) position tiles, y = ceil(M / BM) filter tiles, z = batch * splits.
// bias[m] is added to filter m's outputs where given (convkit.conv2d's, on an unsplit launch; null otherwise).
// Split `z % splits` reduces k in [split * k_per_split, +k_per_split) (a multiple of BK) into
// out + split * N*M*P*Q; `z / splits` picks the GEMM of a batch.
extern "C" __global__ void __launch_bounds__(tf32x3::THREADS, tf32x3::MIN_BLOCKS) implicit_gemm_tf32x3(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
    int N, int C, int H, int W, int M, int P, int Q, int pad, int stride, int k_per_split, int splits,
    long long x_batch, long long w_batch, long long out_batch, const float* __restrict__ bias)
{
    using namespace tf32x3;
#if __CUDA_ARCH__ < 800 && !defined(CONVKIT_EMULATED_MMA)
    __trap();  // no TF32 tensor cores: convkit.families.tf32x3 declines these GPUs before launching
#else
    extern __shared__ __align__(16) float smem[];

    const int batch = blockIdx.z / splits, split_index = blockIdx.z % splits;
    const int K = C * R * S;
    // PRESPLIT: w is the big parts' plane, M rows of KP floats a GEMM (w_batch apart), and the small parts' plane
    // of every GEMM of the batch follows
    const SplitSlices split_slices(M, K, blockIdx.y * BM, threadIdx.x);
    const long long w_plane = (long long)(gridDim.z / splits) * M * split_slices.KP;
    x += batch * x_batch;
    w += batch * w_batch;
    const int PQ = P * Q;
    const long long NPQ = (long long)N * PQ;
    const int k_begin = split_index * k_per_split;
    const int k_end = min(K, k_begin + k_per_split);
    const int m0 = blockIdx.y * BM;
    const long long n0 = (long long)blockIdx.x * BN;
    const int tid = threadIdx.x;

    const im2col::Slices<BM, BN, BK, THREADS, A_STRIDE, B_STRIDE, R, S, VEC> operands(
        x, w, N, C, H, W, M, P, Q, pad, stride, m0, n0, k_end, tid);
    auto load_slice = [&](int stage, int k0) {
        float* As = smem + stage * STAGE_FLOATS;
        if (PRESPLIT) {
            operands.load_inputs(As + A_FLOATS, k0, tid);
            split_slices.load(As, w + (long long)m0 * split_slices.KP, w_plane, k0, k_end);
        } else {
            operands.load(As, As + A_FLOATS, k0, tid);
        }
    };

    const int warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;  // the fragment's row group and thread in group
    const int wm = (warp % WARPS_M) * WARP_M, wn = (warp / WARPS_M) * WARP_N;
    // One k-step's operands of a warp, split: the A fragments (ldmatrix where split ahead, else split here) and B's.
    struct Fragments {
        unsigned a_big[MT][4], a_small[MT][4], b_big[NT][2], b_small[NT][2];
    };
    auto fragments = [&](const float* As, int kk, Fragments& f) {
        const float* As_small = As + BM * SPLIT_STRIDE;  // PRESPLIT only
        const float* Bs = As + A_FLOATS;
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            if (PRESPLIT) {  // lane l: filter row l % 16 of the tile, k from 4 (l / 16)
                const int at = (wm + i * 16 + lane % 16) * SPLIT_STRIDE + kk + 4 * (lane / 16);
                ldmatrix_x4(f.a_big[i], As + at);
                ldmatrix_x4(f.a_small[i], As_small + at);
            } else {
#pragma unroll
                for (int v = 0; v < 4; ++v) {  // (row g, k t), (row g + 8, k t), (row g, k t + 4), (row g + 8, k t + 4)
                    const int m = wm + i * 16 + g + 8 * (v & 1), k = kk + t + 4 * (v >> 1);
                    split(As[k * A_STRIDE + m], f.a_big[i][v], f.a_small[i][v]);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const float* b = Bs + (kk + t) * B_STRIDE + wn + j * 8 + g;
            split(b[0], f.b_big[j][0], f.b_small[j][0]);             // (k t, column g)
            split(b[4 * B_STRIDE], f.b_big[j][1], f.b_small[j][1]);  // (k t + 4, column g)
        }
    };
    // A k-step's products added to part, in the tensor cores: the small products first, so the big one is added to
    // sums of their own size.
    auto products = [&](const Fragments& f, Tiles& part) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                mma(part[i][j], f.a_small[i], f.b_big[j]);
                mma(part[i][j], f.a_big[i], f.b_small[j]);
            }
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j) mma(part[i][j], f.a_big[i], f.b_big[j]);
    };
    Tiles acc;
    zero(acc);

    const int slices = (k_end - k_begin + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) load_slice(s, k_begin + s * BK);
        commit();
    }
    for (int first = 0; first < slices; first += FLUSH) {
        Tiles part;  // the sum of FLUSH slices, from zero in the tensor cores
        zero(part);
#pragma unroll
        for (int it = first; it < first + FLUSH; ++it) {
            if (FLUSH > 1 && it == slices) break;  // the same for the whole block
            wait_stages<STAGES - 2>();  // slice `it` has landed (this thread's copies) ...
            __syncthreads();            // ... everyone's, and slice it - 1's stage is free again
            const float* stage = smem + (it % STAGES) * STAGE_FLOATS;
            const int next = it + STAGES - 1;
            // The slice's two k-steps with the next slice's copies issued between them, as CUTLASS's mainloop
            // spreads its copies over its k-steps: the tensor cores run the first step's products while the warp
            // addresses and issues the copies (issued first, they left the tensor cores idle for some 200
            // instructions a slice; SASS of the 128x128 tile, 64x32 warps, sm_90). On nine of the 3xTF32 chapter's
            // large 3x3 layers (H200, scripts/tf32x3_issue.py): 1.14x at the 128x128 tile with 64x32 warps, 1.10x
            // with 32x64, 1.00x at 64x128, whose two blocks an SM hide the copies already.
            Fragments f;
            if (CONVKIT_COPIES_FIRST) {
                if (next < slices) load_slice(next % STAGES, k_begin + next * BK);
                commit();
            }
            fragments(stage, 0, f);
            products(f, part);
            fragments(stage, 8, f);
            if (!CONVKIT_COPIES_FIRST) {
                if (next < slices) load_slice(next % STAGES, k_begin + next * BK);
                commit();  // an empty group past the end keeps the count wait_stages relies on
            }
            products(f, part);
        }
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int v = 0; v < 4; ++v) acc[i][j][v] += part[i][j][v];  // FP32, rounded to nearest
    }

    // acc[i][j]: filters wm + 16 i + g (+ 8 for v >= 2), positions wn + 8 j + 2 t (+ 1 for odd v)
    float* dst = out + batch * out_batch + (long long)split_index * NPQ * M;
    const bool pair_store = PQ % 2 == 0 && reinterpret_cast<size_t>(dst) % 8 == 0;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = m0 + wm + i * 16 + g + half * 8;
            if (m >= M) continue;
            const float b = bias ? __ldg(bias + m) : 0.0f;  // convkit.conv2d's, unsplit only: a launch saved
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const long long p0 = n0 + wn + j * 8 + 2 * t;
                if (p0 >= NPQ) continue;
                const float v0 = acc[i][j][2 * half] + b, v1 = acc[i][j][2 * half + 1] + b;
                const long long n = (unsigned)p0 / (unsigned)PQ;
                float* at = &dst[(n * M + m) * PQ + (p0 - n * PQ)];
                if (pair_store) {  // p0 is even, so p0 and p0 + 1 share an image
                    *reinterpret_cast<float2*>(at) = make_float2(v0, v1);
                } else {
                    at[0] = v0;
                    if (p0 + 1 < NPQ) {
                        const long long n1 = (unsigned)(p0 + 1) / (unsigned)PQ;
                        dst[(n1 * M + m) * PQ + (p0 + 1 - n1 * PQ)] = v1;
                    }
                }
            }
        }
#endif
}

// The weights split ahead for PRESPLIT, once per call: w (M rows of K) into a big plane and then a small one, each M
// rows of KP = K rounded up to whole float4s (zero-padded), split as the loop splits the inputs.
extern "C" __global__ void split_weights_tf32x3(const float* __restrict__ w, float* __restrict__ planes, int M, int K)
{
    const int KP = (K + 3) / 4 * 4;
    const long long count = (long long)M * KP;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
        const int m = (int)(i / KP), k = (int)(i - (long long)m * KP);
        float big = 0.0f, small = 0.0f;
        if (k < K) tf32::split_ahead(w[(long long)m * K + k], big, small);
        planes[i] = big;
        planes[count + i] = small;
    }
}
