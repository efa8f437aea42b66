// The implicit GEMM's operands, a BK-deep slice at a time, from NCHW inputs and MCRS filters into
// shared memory, as implicit_gemm.cu stages them (its load_slice, with the rows' strides as parameters),
// for implicit_gemm_tf32x3.cu. implicit_gemm.cu keeps its own copy: built from this struct, its 128x128
// tile with 7x7 filters spills 8 bytes at 4 stages (it spills 24 at 3 either way), and its recorded
// launches stay as they were measured.
// Out[m][pos] = sum_k W[m][k] * X~[k][pos], k = (c, r, s) over C*R*S, pos = (n, p, q) over N*P*Q; X~ (im2col)
// is read in place and never materialised.
//   - Weights go k-major (As[k][m], rows A_STRIDE floats apart) by 4-byte copies along k (whole 32-byte
//     sectors per BK lanes).
//   - Inputs (Bs[k][pos], rows B_STRIDE floats apart): consecutive lanes take consecutive positions
//     (coalesced NCHW reads); each thread decodes its positions (image, top-left input pixel) once, and per
//     slice only its k into (c, r, s), R and S being compile-time constants. Taps in the padding are
//     zero-filled by the copy itself (cp.async with 0 source bytes). For 1x1 filters at stride 1 without
//     padding, X~ is X[n] itself: VEC = 4 copies 16 bytes of consecutive positions at a time.
//   - Addresses are 32-bit offsets (w and x under 2^31 elements), unsigned where they become pointers (one
//     zero-extending wide multiply-add); a copy that reads nothing points at the operand's first element.
// Included textually by convkit.cuda.nvrtc (NVRTC) and by nvcc from this directory; needs staging.cuh.
#pragma once

namespace im2col {
// One bit per filter tap: 32 bits up to 5x5, 64 for 7x7.
template <bool Narrow> struct TapMaskOf { using type = unsigned; };
template <> struct TapMaskOf<false> { using type = unsigned long long; };

template <int BM, int BN, int BK, int THREADS, int A_STRIDE, int B_STRIDE, int R, int S, int VEC>
struct Slices {
    static constexpr int RS = R * S;
    static constexpr int A_LOADS = BM * BK / THREADS;  // weights a thread stages per slice
    // Inputs, 16-byte copies (VEC 4): threads in row-major order over the slice's BK x BN/4 float4s.
    static constexpr int B_COLS = BN / 4, B_LOADS = BN * BK / (THREADS * 4);
    // Inputs, 4-byte copies (VEC 1): a warp per slice row, each lane the same BN/32 positions in every row
    // (lane, lane + 32, ...); per slice a thread decodes k -> (c, r, s) once per row it takes.
    static constexpr int ROWS_PER_PASS = THREADS / 32, ROW_PASSES = BK / ROWS_PER_PASS, LANE_COLS = BN / 32;
    // Filters of more than 64 taps (AlexNet's 11x11) keep the top-left corner and test each tap as it loads.
    static constexpr bool MASKED = RS <= 64;
    using TapMask = typename TapMaskOf<RS <= 32>::type;
    static_assert(VEC == 1 || (VEC == 4 && RS == 1), "16-byte input copies need 1x1 filters");
    static_assert(THREADS % BK == 0 && A_LOADS >= 1 && THREADS % B_COLS == 0 && B_LOADS >= 1 && ROW_PASSES >= 1,
                  "whole slice rows per pass of the block's threads");

    const float* x;
    const float* w;
    int C, H, W, HW, K, k_end;
    // Weights this thread stages: w[m0 + a_m + i * THREADS / BK][k0 + a_k] for i < a_rows.
    int a_k, a_m, a_off, a_step, a_rows;
    // Inputs, VEC 4: positions n0 + b_col .. + 3 at slice rows b_row + i * THREADS / B_COLS.
    int b_col, b_row, x_off4;
    bool pos4_ok;
    // Inputs, VEC 1: positions n0 + lane + 32 j, as the offset of their top-left tap in x and a mask of the
    // taps (r, s) that fall inside the input (none for a position past the end).
    int x_off[LANE_COLS], top[LANE_COLS], left[LANE_COLS];
    TapMask inside[LANE_COLS];

    __device__ __forceinline__ Slices(const float* x_, const float* w_, int N, int C_, int H_, int W_, int M, int P,
                                      int Q, int pad, int stride, int m0, long long n0, int k_end_, int tid)
        : x(x_), w(w_), C(C_), H(H_), W(W_), HW(H_ * W_), K(C_ * RS), k_end(k_end_)
    {
        const int PQ = P * Q;
        const long long NPQ = (long long)N * PQ;
        a_k = tid % BK;
        a_m = tid / BK;
        a_off = (m0 + a_m) * K + a_k;
        a_step = (THREADS / BK) * K;
        a_rows = M - m0 - a_m <= 0 ? 0 : (M - m0 - a_m + THREADS / BK - 1) / (THREADS / BK);
        b_col = (tid % B_COLS) * 4;
        b_row = tid / B_COLS;
        const long long pos4 = n0 + b_col;
        pos4_ok = VEC == 4 && pos4 < NPQ;
        const int img4 = pos4_ok ? (int)((unsigned)pos4 / (unsigned)PQ) : 0;
        x_off4 = img4 * C * HW + (pos4_ok ? (int)(pos4 - (long long)img4 * PQ) : 0);
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
    }

    // Issue the copies of the slice k0 .. k0 + BK into As (BK rows of A_STRIDE) and Bs (BK rows of B_STRIDE).
    __device__ __forceinline__ void load(float* As, float* Bs, int k0, int tid) const
    {
        load_weights(As, k0);
        load_inputs(Bs, k0, tid);
    }

    // The weights' slice alone (As, BK rows of A_STRIDE).
    __device__ __forceinline__ void load_weights(float* As, int k0) const
    {
        const bool ka_ok = k0 + a_k < k_end;
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const bool ok = ka_ok && i < a_rows;
            copy4(&As[a_k * A_STRIDE + a_m + i * (THREADS / BK)], w + (unsigned)(ok ? a_off + i * a_step + k0 : 0), ok);
        }
    }

    // The inputs' slice alone (Bs, BK rows of B_STRIDE).
    __device__ __forceinline__ void load_inputs(float* Bs, int k0, int tid) const
    {
        if (VEC == 4) {
#pragma unroll
            for (int i = 0; i < B_LOADS; ++i) {
                const int row = b_row + i * (THREADS / B_COLS);
                const int k = k0 + row;
                const bool ok = pos4_ok && k < k_end;
                copy16(&Bs[row * B_STRIDE + b_col], x + (unsigned)(ok ? x_off4 + k * HW : 0), ok ? 16 : 0);
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
                    copy4(&Bs[row * B_STRIDE + tid % 32 + 32 * j], x + (unsigned)(ok ? x_off[j] + tap : 0), ok);
                }
            }
        }
    }

};
}  // namespace im2col
