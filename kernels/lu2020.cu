// Lu, Zhang, Wang, "Optimizing GPU Memory Transactions for Convolution Operations" (IEEE CLUSTER
// 2020; RTX 2080 Ti), section "Memory Transaction Optimization", and the study's steps past it.
//
//   out[n][m][p][q] = sum_{c,r,s} w[m][c][r][s] * in[n][c][p + r - pad][q + s - pad]
//
// NCHW float32, zero padding `pad`, stride 1, K x K filters (K = LU_K: 3, 5, 7), FP32 FMA accumulation.
//
// The 32 lanes of a warp compute 32 adjacent output columns. For one filter row, lane t needs the
// window in[q0 - pad + t + s], s = 0..K-1, of which its neighbours hold most.
//   Column reuse (section "Column Reuse", Figure 3): each lane loads only the window slots in
//   LU_LOADS (0 and K-1, plus 2 for K = 7) and fills the rest with __shfl_xor_sync. A step
//   (slot j, xor mask m) is legal when every lane holds slots j - m and j + m: a lane whose bit m is
//   clear gets partner t + m's slot j - m, a lane whose bit m is set gets partner t - m's slot j + m.
//   So the slot a lane SENDS depends on its lane id. The schedule (LU_STEPS) is computed by
//   convkit.papers.lu2020.warp_sim.exchange_schedule and passed in as macros, so the simulator and the kernel run
//   the same exchange.
//     naive: win[lane-dependent index] -- the dynamic indexing the paper says puts the window in
//       local memory.
//     packed (Algorithms 1 and 2): pack slots (j + m, j - m) into 64 bits, shift right by 32 where
//       the lane sends j + m, keep the low word: every register index is static.
//   Row reuse (section "Row Reuse", Algorithm 3): one thread computes LU_ROWS outputs down a column,
//   loads each of the LU_ROWS + K - 1 input rows once and applies it to every filter row that needs
//   it. The loops are fully unrolled, so the accumulators stay in registers (static indexing).
//   Combined: row reuse whose rows are gathered by column reuse.
//   Multi-channel (lu_multi, for CNN layers): the combined form summed over channels, LU_FILTERS
//   filters per thread; the block stages LU_STAGE_CHANNELS channels of its filters in shared memory
//   (filter-fastest, so one 16-byte broadcast read feeds 4 filters x LU_ROWS outputs).
//
// Launch: block (32, LU_WARPS); grid (ceil(Q / 32), ceil(P / (rows * LU_WARPS)), planes), where
// planes = N * M for the single-channel kernels (C = 1) and N * ceil(M / LU_FILTERS) for lu_multi.
// Every lane takes part in the shuffles, also those right of the output (their loads feed
// neighbours); loads outside the image read zero. Memory traffic per warp is what
// convkit.papers.lu2020.warp_sim.problem_loads counts: the filter (K * K uniform loads), then for each input row
// inside the image one load instruction per loaded slot.
//
// Not reproduced: the paper's sources (not published), its thread-block shapes and its
// multi-channel kernel's details (the extract describes the single-channel method only).

#include <cuda_runtime.h>

#ifndef LU_K
#define LU_K 5
#define LU_NLOADS 2
#define LU_LOADS 0, 4
#define LU_NSTEPS 3
#define LU_STEPS 2, 2, 1, 1, 3, 1
#endif
#ifndef LU_ROWS
#define LU_ROWS 8
#endif
#ifndef LU_WARPS
#define LU_WARPS 4
#endif
#ifndef LU_FILTERS
#define LU_FILTERS 8
#endif
#ifndef LU_STAGE_CHANNELS
#define LU_STAGE_CHANNELS 8
#endif

constexpr int K = LU_K;
constexpr unsigned kFullWarp = 0xffffffffu;
static_assert(K % 2 == 1 && K >= 1 && K <= 9, "LU_K: an odd filter width up to 9");
static_assert(LU_FILTERS % 4 == 0, "LU_FILTERS: whole float4 filter reads");

// The exchange schedule as compile-time values (a local array in a constexpr function: usable in
// device code, folded at compile time).
__host__ __device__ constexpr int load_slot(int i) { constexpr int v[] = {LU_LOADS}; return v[i]; }
__host__ __device__ constexpr int step_value(int i) { constexpr int v[] = {LU_STEPS}; return v[i]; }

// static_for<0, N>(f) calls f(Int<0>{}), ..., f(Int<N-1>{}): indices that are constants in the body.
template <int N> struct Int { static constexpr int value = N; };
template <int I, int N, class F>
__device__ __forceinline__ void static_for(F&& f)
{
    if constexpr (I < N) {
        f(Int<I>{});
        static_for<I + 1, N>(f);
    }
}

enum class Gather { kLoadAll, kShufflePacked };

__device__ __forceinline__ float load_or_zero(const float* row, int col, int width)
{
    return static_cast<unsigned>(col) < static_cast<unsigned>(width) ? __ldg(row + col) : 0.0f;
}

// The schedule's loaded slots of the lane's window in one input row (`col0`: the lane's first column).
__device__ __forceinline__ void load_slots(float (&dst)[LU_NLOADS], const float* row, int col0, int width)
{
    static_for<0, LU_NLOADS>([&](auto i) { dst[i.value] = load_or_zero(row, col0 + load_slot(i.value), width); });
}

// Algorithms 1-2 for every step of the schedule: fill the window's other slots from other lanes.
__device__ __forceinline__ void exchange_packed(float (&win)[K], int lane)
{
    static_for<0, LU_NSTEPS>([&](auto i) {
        constexpr int j = step_value(2 * decltype(i)::value), m = step_value(2 * decltype(i)::value + 1);
        // {high: slot j+m, low: slot j-m}; lanes with bit m clear send the high word
        const unsigned long long packed =
            (static_cast<unsigned long long>(__float_as_uint(win[j + m])) << 32) | __float_as_uint(win[j - m]);
        const int shift = ((lane + m) & m) * (32 / m);  // 32 where bit m is clear, else 0
        win[j] = __shfl_xor_sync(kFullWarp, __uint_as_float(static_cast<unsigned>(packed >> shift)), m);
    });
}

// The window from the loaded slots: place them, then exchange.
__device__ __forceinline__ void window_from_slots(float (&win)[K], const float (&loaded)[LU_NLOADS], int lane)
{
    static_for<0, LU_NLOADS>([&](auto i) { win[load_slot(i.value)] = loaded[i.value]; });
    exchange_packed(win, lane);
}

// The lane's K-wide window of one input row (`row` points at the row, `col0` is the lane's first
// column): K loads, or the schedule's loads and a shuffle exchange.
template <Gather kGather>
__device__ __forceinline__ void gather_window(float (&win)[K], const float* row, int col0, int width, int lane)
{
    if constexpr (kGather == Gather::kLoadAll) {
#pragma unroll
        for (int s = 0; s < K; ++s) win[s] = load_or_zero(row, col0 + s, width);
    } else {
        float loaded[LU_NLOADS];
        load_slots(loaded, row, col0, width);
        window_from_slots(win, loaded, lane);
    }
}

// A K x K filter into registers (every lane reads the same taps: one broadcast each).
__device__ __forceinline__ void load_filter(float (&f)[K][K], const float* __restrict__ filter)
{
#pragma unroll
    for (int r = 0; r < K; ++r)
#pragma unroll
        for (int s = 0; s < K; ++s) f[r][s] = __ldg(filter + r * K + s);
}

// One warp: rows kRows outputs down each of 32 columns of one image plane and one filter (C = 1).
template <int kRows, Gather kGather>
__device__ __forceinline__ void single_channel(const float* __restrict__ x, const float* __restrict__ w,
                                               float* __restrict__ y, int H, int W, int M, int P, int Q, int pad)
{
    const int lane = threadIdx.x;
    const int p0 = (blockIdx.y * LU_WARPS + threadIdx.y) * kRows;
    if (p0 >= P) return;  // warp-uniform
    const int q = blockIdx.x * 32 + lane;
    const int plane = blockIdx.z;  // n * M + m
    const float* image = x + static_cast<long long>(plane / M) * H * W;
    float f[K][K];
    load_filter(f, w + (plane % M) * K * K);

    float acc[kRows];
#pragma unroll
    for (int o = 0; o < kRows; ++o) acc[o] = 0.0f;
    // Input row i feeds output o = i - r through filter row r (Algorithm 3, all three cases at once).
#pragma unroll
    for (int i = 0; i < kRows + K - 1; ++i) {
        const int h = p0 - pad + i;
        float win[K];
        if (h >= 0 && h < H) {
            gather_window<kGather>(win, image + static_cast<long long>(h) * W, q - pad, W, lane);
        } else {
#pragma unroll
            for (int s = 0; s < K; ++s) win[s] = 0.0f;
        }
#pragma unroll
        for (int r = 0; r < K; ++r) {
            const int o = i - r;
            if (o < 0 || o >= kRows) continue;
#pragma unroll
            for (int s = 0; s < K; ++s) acc[o] = fmaf(win[s], f[r][s], acc[o]);
        }
    }
    if (q >= Q) return;
    float* out = y + static_cast<long long>(plane) * P * Q + q;
#pragma unroll
    for (int o = 0; o < kRows; ++o)
        if (p0 + o < P) out[static_cast<long long>(p0 + o) * Q] = acc[o];
}

#define LU_SINGLE_ARGS                                                                                  \
    const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y, int H, int W, int M, \
        int P, int Q, int pad

// Figure 3a: every window element from global memory.
extern "C" __global__ void __launch_bounds__(32 * LU_WARPS) lu_direct(LU_SINGLE_ARGS)
{
    single_channel<1, Gather::kLoadAll>(x, w, y, H, W, M, P, Q, pad);
}
// Figure 3b/c as the text first writes it: the thread's window iTemp[K * K], each row's loaded slots
// from global memory, the others with __shfl_xor_sync(iTemp[i], m) where i depends on the lane. Plain
// loops, no unrolling asked for: whether iTemp stays in registers is the compiler's call (the chapter
// shows its ptxas report per architecture).
extern "C" __global__ void __launch_bounds__(32 * LU_WARPS) lu_column_naive(LU_SINGLE_ARGS)
{
    const int lane = threadIdx.x;
    const int p = blockIdx.y * LU_WARPS + threadIdx.y;
    if (p >= P) return;
    const int q = blockIdx.x * 32 + lane;
    const int plane = blockIdx.z;
    const float* image = x + static_cast<long long>(plane / M) * H * W;
    const float* filter = w + (plane % M) * K * K;
    float iTemp[K * K];
    for (int r = 0; r < K; ++r) {
        const int h = p - pad + r;
        const float* row = image + static_cast<long long>(h) * W;
        const bool inside = h >= 0 && h < H;
        for (int i = 0; i < LU_NLOADS; ++i)
            iTemp[r * K + load_slot(i)] = inside ? load_or_zero(row, q - pad + load_slot(i), W) : 0.0f;
        for (int i = 0; i < LU_NSTEPS; ++i) {
            const int j = step_value(2 * i), m = step_value(2 * i + 1);
            const int send = j - m + 2 * ((lane + m) & m);  // slot j + m where bit m is clear, else j - m
            iTemp[r * K + j] = __shfl_xor_sync(kFullWarp, iTemp[r * K + send], m);
        }
    }
    float acc = 0.0f;
    for (int t = 0; t < K * K; ++t) acc = fmaf(iTemp[t], __ldg(filter + t), acc);
    if (q < Q) y[static_cast<long long>(plane) * P * Q + static_cast<long long>(p) * Q + q] = acc;
}
// Algorithms 1 and 2.
extern "C" __global__ void __launch_bounds__(32 * LU_WARPS) lu_column(LU_SINGLE_ARGS)
{
    single_channel<1, Gather::kShufflePacked>(x, w, y, H, W, M, P, Q, pad);
}
// Algorithm 3.
extern "C" __global__ void __launch_bounds__(32 * LU_WARPS) lu_row(LU_SINGLE_ARGS)
{
    single_channel<LU_ROWS, Gather::kLoadAll>(x, w, y, H, W, M, P, Q, pad);
}
// Algorithm 3 on rows gathered by Algorithms 1 and 2.
extern "C" __global__ void __launch_bounds__(32 * LU_WARPS) lu_combined(LU_SINGLE_ARGS)
{
    single_channel<LU_ROWS, Gather::kShufflePacked>(x, w, y, H, W, M, P, Q, pad);
}

// ---------------------------------------------------------------------------------------------
// Multi-channel: the combined form summed over C channels, LU_FILTERS filters per thread.

extern "C" __global__ void __launch_bounds__(32 * LU_WARPS) lu_multi(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int C, int H, int W, int M,
    int P, int Q, int pad)
{
    constexpr int kRows = LU_ROWS, kF = LU_FILTERS, kCC = LU_STAGE_CHANNELS;
    // Filters of the stage, [channel][r][s][filter]: one float4 read gives 4 filters' tap.
    __shared__ __align__(16) float staged[kCC * K * K * kF];
    const int lane = threadIdx.x;
    const int p0 = (blockIdx.y * LU_WARPS + threadIdx.y) * kRows;
    const bool active = p0 < P;  // idle warps still help stage the filters
    const int q = blockIdx.x * 32 + lane;
    const int groups = (M + kF - 1) / kF;
    const int n = blockIdx.z / groups, m0 = (blockIdx.z % groups) * kF;
    const float* image = x + static_cast<long long>(n) * C * H * W;

    float acc[kRows][kF];
#pragma unroll
    for (int o = 0; o < kRows; ++o)
#pragma unroll
        for (int f = 0; f < kF; ++f) acc[o][f] = 0.0f;

    // The column's input rows of one channel, loaded slots only: the next channel's are in flight
    // while the current one is computed (the loads do not wait for the staged filters).
    float next[kRows + K - 1][LU_NLOADS];
    auto load_channel = [&](int c) {
        const float* plane = image + static_cast<long long>(c) * H * W;
#pragma unroll
        for (int i = 0; i < kRows + K - 1; ++i) {
            const int h = p0 - pad + i;
            if (h >= 0 && h < H) {
                load_slots(next[i], plane + static_cast<long long>(h) * W, q - pad, W);
            } else {
#pragma unroll
                for (int l = 0; l < LU_NLOADS; ++l) next[i][l] = 0.0f;
            }
        }
    };
    if (active) load_channel(0);

    for (int c0 = 0; c0 < C; c0 += kCC) {
        __syncthreads();  // the previous stage's filters are no longer read
        for (int i = threadIdx.y * 32 + lane; i < kCC * K * K * kF; i += 32 * LU_WARPS) {
            const int f = i % kF, tap = (i / kF) % (K * K), cc = i / (kF * K * K);
            const bool inside = m0 + f < M && c0 + cc < C;
            staged[i] = inside ? __ldg(w + (static_cast<long long>(m0 + f) * C + c0 + cc) * K * K + tap) : 0.0f;
        }
        __syncthreads();
        if (!active) continue;
        const int channels = min(kCC, C - c0);
        for (int cc = 0; cc < channels; ++cc) {
            float win[kRows + K - 1][K];  // every input row of the column: each filter tap read once
#pragma unroll
            for (int i = 0; i < kRows + K - 1; ++i) window_from_slots(win[i], next[i], lane);
            if (c0 + cc + 1 < C) load_channel(c0 + cc + 1);
            const float4* taps = reinterpret_cast<const float4*>(staged + cc * K * K * kF);
#pragma unroll
            for (int r = 0; r < K; ++r)
#pragma unroll
                for (int s = 0; s < K; ++s)
#pragma unroll
                    for (int f4 = 0; f4 < kF / 4; ++f4) {
                        const float4 t = taps[(r * K + s) * (kF / 4) + f4];
#pragma unroll
                        for (int o = 0; o < kRows; ++o) {
                            const float v = win[o + r][s];
                            acc[o][4 * f4 + 0] = fmaf(v, t.x, acc[o][4 * f4 + 0]);
                            acc[o][4 * f4 + 1] = fmaf(v, t.y, acc[o][4 * f4 + 1]);
                            acc[o][4 * f4 + 2] = fmaf(v, t.z, acc[o][4 * f4 + 2]);
                            acc[o][4 * f4 + 3] = fmaf(v, t.w, acc[o][4 * f4 + 3]);
                        }
                    }
        }
    }
    if (!active || q >= Q) return;
#pragma unroll
    for (int f = 0; f < kF; ++f) {
        if (m0 + f >= M) break;
        float* out = y + (static_cast<long long>(n) * M + m0 + f) * P * Q + q;
#pragma unroll
        for (int o = 0; o < kRows; ++o)
            if (p0 + o < P) out[static_cast<long long>(p0 + o) * Q] = acc[o][f];
    }
}

// ---------------------------------------------------------------------------------------------
// Past the paper: lu_wide, four output columns per lane (a warp covers 128), LU_ROWS rows each.
//
// The paper's lanes own one column each, so every window tap costs the exchange and index work of a
// column of its own: on the H100 the combined kernel issues about 6 instructions per output at 7x7
// (ncu) and is bound by issue, not bandwidth. Here each lane loads its four input columns with one
// 16-byte load per input row (`vec`; 4-byte loads where W, Q or a base forbids it) and takes the
// window's halo from its neighbours: the columns left of its four from lane - 1 (__shfl_up_sync), those
// right of them from lane + 1 (__shfl_down_sync); lanes 0 and 31 load the neighbouring warps' columns. One input
// row then feeds 4 columns x K taps of every output row that needs it (row reuse): about 3K gather
// instructions against 4K^2 FMAs. The padding is a compile-time LU_WIDE_PAD (the kernel's `pad` must
// equal it) with LU_WIDE_PAD <= 4 and K - 1 - LU_WIDE_PAD <= 4: every "same" filter up to 9x9.
// Launch: block (32, LU_WARPS); grid (ceil(Q / 128), ceil(P / (LU_ROWS * LU_WARPS)), N * M).

#ifndef LU_WIDE_PAD
#define LU_WIDE_PAD (LU_K / 2)
#endif
constexpr int kWideCols = 4, kWidePad = LU_WIDE_PAD, kWideWin = kWideCols + K - 1;
static_assert(kWidePad >= 0 && kWidePad <= 4 && K - 1 - kWidePad <= 4, "LU_WIDE_PAD: the halo within a neighbour");

__device__ __forceinline__ float4 load4_or_zero(const float* row, int col, int width, bool vec)
{
    if (vec) {  // col % 4 == 0, width % 4 == 0, a 16-byte aligned row: the four are all in or all out
        if (static_cast<unsigned>(col) < static_cast<unsigned>(width))
            return __ldg(reinterpret_cast<const float4*>(row + col));
        return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    return make_float4(load_or_zero(row, col, width), load_or_zero(row, col + 1, width),
                       load_or_zero(row, col + 2, width), load_or_zero(row, col + 3, width));
}

template <int I>
__device__ __forceinline__ float component(const float4& v)
{
    static_assert(I >= 0 && I < 4, "a float4 has four components");
    if constexpr (I == 0) return v.x;
    else if constexpr (I == 1) return v.y;
    else if constexpr (I == 2) return v.z;
    else return v.w;
}

// The lane's window of one input row: win[j] = row[q - LU_WIDE_PAD + j] (`q`: the lane's first output column).
__device__ __forceinline__ void wide_window(float (&win)[kWideWin], const float* row, int q, int width, bool vec,
                                            int lane)
{
    const float4 own = load4_or_zero(row, q, width, vec);
    static_for<0, kWideWin>([&](auto jj) {
        constexpr int dx = decltype(jj)::value - kWidePad;  // column q + dx
        if constexpr (dx >= 0 && dx < kWideCols) {
            win[decltype(jj)::value] = component<dx>(own);
        } else if constexpr (dx < 0) {  // lane - 1's column q + dx; lane 0 loads the previous warp's
            const float v = __shfl_up_sync(kFullWarp, component<kWideCols + dx>(own), 1);
            win[decltype(jj)::value] = lane == 0 ? load_or_zero(row, q + dx, width) : v;
        } else {  // lane + 1's; lane 31 loads the next warp's
            const float v = __shfl_down_sync(kFullWarp, component<dx - kWideCols>(own), 1);
            win[decltype(jj)::value] = lane == 31 ? load_or_zero(row, q + dx, width) : v;
        }
    });
}

extern "C" __global__ void __launch_bounds__(32 * LU_WARPS) lu_wide(LU_SINGLE_ARGS, int vec)
{
    constexpr int kRows = LU_ROWS;
    const int lane = threadIdx.x;
    const int p0 = (blockIdx.y * LU_WARPS + threadIdx.y) * kRows;  // rows past P read zero, write nothing
    const int q = blockIdx.x * (32 * kWideCols) + kWideCols * lane;
    const int plane = blockIdx.z;  // n * M + m
    const float* image = x + static_cast<long long>(plane / M) * H * W;
    float f[K][K];
    load_filter(f, w + (plane % M) * K * K);

    float acc[kRows][kWideCols] = {};
#pragma unroll
    for (int i = 0; i < kRows + K - 1; ++i) {
        const int h = p0 - kWidePad + i;
        const bool inside = h >= 0 && h < H;  // warp-uniform; outside, a width of 0 reads zeros
        float win[kWideWin];
        wide_window(win, image + static_cast<long long>(inside ? h : 0) * W, q, inside ? W : 0, vec != 0, lane);
#pragma unroll
        for (int r = 0; r < K; ++r) {
            const int o = i - r;
            if (o < 0 || o >= kRows) continue;
#pragma unroll
            for (int c = 0; c < kWideCols; ++c)
#pragma unroll
                for (int s = 0; s < K; ++s) acc[o][c] = fmaf(win[c + s], f[r][s], acc[o][c]);
        }
    }
    float* out = y + static_cast<long long>(plane) * P * Q;
#pragma unroll
    for (int o = 0; o < kRows; ++o) {
        if (p0 + o >= P) break;
        float* dst = out + static_cast<long long>(p0 + o) * Q + q;
        if (vec && q + kWideCols <= Q) {
            *reinterpret_cast<float4*>(dst) = make_float4(acc[o][0], acc[o][1], acc[o][2], acc[o][3]);
        } else {
#pragma unroll
            for (int c = 0; c < kWideCols; ++c)
                if (q + c < Q) dst[c] = acc[o][c];
        }
    }
}
