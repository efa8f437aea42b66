// 3xTF32 implicit GEMM convolution on Hopper's warpgroup MMA (wgmma, sm_90a): FP32 accuracy from TF32 tensor
// cores, as implicit_gemm_tf32x3.cu (CUTLASS's fast-FP32 split, include/cutlass/gemm/warp/mma_tensor_op_fast_f32.h:
// big = a rounded to TF32, small = a - big; small*big + big*small + big*big, each K-tile summed apart and added in
// FP32) on the instruction that replaced mma.sync there, weights and inputs split by that rule (tf32::split_ahead).
// CUTLASS has no 3xTF32 kernel for sm90 (its FP32 emulation past SM80 is Blackwell's), so this one is convkit's own:
// a first version, the 3xTF32 family's igemm_wgmma_tf32x3 (convkit/families/tf32x3/wgmma.py), checked and timed
// apart by scripts/wgmma_probe.py. Further on, two
// warp-specialised kernels (a producer warpgroup staging ahead of two consumers, mbarriers between them): one gathering
// and splitting the inputs as this one does (implicit_gemm_wgmma_ws_tf32x3), one copying them split ahead, channels
// last (implicit_gemm_wgmma_ws_nhwc_tf32x3); and the products' ceiling, the pace of their tensor cores alone.
//
// The GEMM: D[M][pixels] = A[M][K] . B[K][pixels], K = C R S; A the weights split ahead into a big and a small
// plane (split_weights_tf32x3 in implicit_gemm_tf32x3.cu: [M][KP], rows padded to whole float4s), B the input's
// im2col columns, gathered and split as they are staged. A block of 256 threads (two warpgroups) computes a
// 128 x N tile of D; each warpgroup 64 filters x N pixels with wgmma m64nNk8, both operands in shared memory.
// A K-tile of 32 is 4 wgmma k-steps of 3 products each, either into the tile's own accumulators, then added to
// the block's in FP32 (CUTLASS's staged accumulation: twice the registers), or summed on in the tensor cores
// (which truncate as they add: the error grows with K). A stage's products are issued as soon as it is ready, and
// while the tensor cores work on them a later stage's weights arrive by 16-byte cp.async and its inputs by loads
// into registers, split and stored: with two stages the next K-tile's, the products waited for before the
// barrier; with three the one after it, the products of one K-tile left running while the next are issued.
//
// Shared memory per operand plane, K-major without swizzle (the PTX ISA's canonical layout
// ((8,m),(4,2k)):((4,SBO),(1,LBO)) for tf32): [k-group of 4][row][4 floats], each row's 4 floats one 16-byte
// line, so that a core matrix (8 rows x 16 bytes) is 128 contiguous bytes: SBO = 128 bytes from one 8-row group
// to the next, LBO = ROWS x 16 bytes from one k-group to the next. A thread's 16-byte store of one row's k-group
// and a warp's 32 consecutive rows fill 512 contiguous bytes, free of bank conflicts.
//
// Layout: x NCHW, w MCRS (split into planes), out NMPQ, float32, C-contiguous, each under 2^31 elements.
// Compile-time knobs: CONVKIT_R, CONVKIT_S, CONVKIT_WG_N (128 or 256), CONVKIT_STAGED (1 or 0; 256 with 1
// would hold 256 accumulators a thread), CONVKIT_STAGES (2, or 3 unstaged at 128), CONVKIT_WS_IN_FLIGHT (the
// warp-specialised kernels' K-tiles of products in flight a consumer, 1 or 2), CONVKIT_WS_PERSISTENT (the
// warp-specialised kernels: a block an SM, over the output tiles), CONVKIT_WS_FILTERS (theirs: 128 or 64 filters a
// block; the gathering kernel's 32 or 16, its pixels the products' rows), CONVKIT_WS_PINGPONG (at 64, persistent: the
// consumers on alternate output tiles), CONVKIT_WS_INPUTS_FP32 (the split-ahead kernel: its inputs split as staged),
// CONVKIT_WS_TAP_PAIRS (its K-tiles two taps of 16 channels, for layers of at most 16), CONVKIT_WS_CLUSTER (the
// gathering kernel with K split: its splits one cluster, their sums added there), CONVKIT_WS_PRODUCER_HALVES (its
// producer's loads of two K-tiles in flight, a half's each), CONVKIT_WS_WEIGHTS_IN_BLOCK (its weights read as given,
// split by its consumers); for scripts/wgmma_probe.py alone, CONVKIT_WG_PART times a part of the main loop
// (the products, the staging, or all but the weights' traffic) and CONVKIT_WG_TIMELINE stamps the gathering kernel's
// blocks' phases. Dynamic shared memory: stages x (2 x 128 + 2 x N) x 32 floats (128 KiB at N = 128 in two
// stages, 192 in three or at 256). Built for sm_90a only (compute_90a PTX): elsewhere the kernel body is empty, but
// under tests/cuda_emulator, whose CONVKIT_EMULATED_WGMMA computes each thread's part of a product from the
// descriptors.
#include "cluster.cuh"           // a K split's sums added across a cluster
#include "dependent_launch.cuh"  // wait_for_previous_kernel, let_next_kernel_start: launched early
#include "tf32_split.cuh"
#include "wgmma.cuh"           // the instruction: descriptors, products, fences and groups
#include "wgmma_operands.cuh"  // the layouts the operands are split ahead into

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(CONVKIT_EMULATED_WGMMA)
#define CONVKIT_WGMMA_BODY 1
#endif

#ifndef CONVKIT_R
#define CONVKIT_R 3
#endif
#ifndef CONVKIT_S
#define CONVKIT_S 3
#endif
#ifndef CONVKIT_WG_N  // the wgmma's N: the block's pixels (128 or 256)
#define CONVKIT_WG_N 128
#endif
#ifndef CONVKIT_STAGED  // 1: each K-tile summed apart and added in FP32; 0: summed on in the tensor cores
#define CONVKIT_STAGED 1
#endif
#ifndef CONVKIT_STAGES  // shared-memory stages: 2, or 3 (a K-tile's products still running as the next are issued)
#define CONVKIT_STAGES 2
#endif
#ifndef CONVKIT_WS_IN_FLIGHT  // the warp-specialised kernel's K-tiles of products a consumer keeps running: 1 or 2
#define CONVKIT_WS_IN_FLIGHT 1
#endif
#ifndef CONVKIT_WS_PERSISTENT  // the split-ahead kernel: 1 a block an SM, looping over the output tiles
#define CONVKIT_WS_PERSISTENT 0
#endif
#ifndef CONVKIT_WS_FILTERS  // the warp-specialised kernels' filters a block: 128 (64 a consumer), 64 (its consumers
#define CONVKIT_WS_FILTERS 128  // take alternate K-tiles, their sums then added), or 32 or 16 (pixels on the rows)
#endif
#ifndef CONVKIT_WS_PINGPONG  // the warp-specialised kernels at 64 filters a block, persistent: 1 their consumers take
#define CONVKIT_WS_PINGPONG 0  // alternate output tiles, one storing as the other multiplies; 0 alternate K-tiles
#endif
#ifndef CONVKIT_WS_TAP_PAIRS  // the split-ahead kernel on at most 16 channels: 1 a K-tile two taps of 16 channels
#define CONVKIT_WS_TAP_PAIRS 0
#endif
#ifndef CONVKIT_WS_WIDTH  // the warp-specialised kernels' pixels a block: 128, or 64 (the split-ahead kernel at 64
#define CONVKIT_WS_WIDTH 128  // filters with ping-pong: twice the tiles of a layer of few, each an m64n64k8 product)
#endif
#ifndef CONVKIT_WS_CLUSTER  // the gathering kernel with K split (gridDim.z): 0 each split's sums a plane of partial
#define CONVKIT_WS_CLUSTER 0  // outputs, which sum_planes adds up; else the splits, this many, one cluster, added in it
#endif
#ifndef CONVKIT_WS_PRODUCER_HALVES  // the gathering kernel: 1 its producer's two halves stage alternate K-tiles, each
#define CONVKIT_WS_PRODUCER_HALVES 0  // thread two pixels' columns of a K-tile
#endif
#ifndef CONVKIT_WS_WEIGHTS_IN_BLOCK  // the gathering kernel at 32 or 16 filters, a block a tile: 1 its weights read as
#define CONVKIT_WS_WEIGHTS_IN_BLOCK 0  // given, split by its consumers into the stages
#endif
#ifndef CONVKIT_WS_INPUTS_FP32  // the split-ahead kernel (direct, and Winograd's products): 1 its inputs one FP32
#define CONVKIT_WS_INPUTS_FP32 0  // plane, split by the consumers once staged; 0 split ahead into two planes
#endif
#ifndef CONVKIT_WG_PART  // either kernel's timing experiment, part of its main loop (the output then wrong): 0 the
#define CONVKIT_WG_PART 0  // whole loop; 1 the products alone (no input gathered or split); 2 the staging alone;
#endif                     // 3 (warp-specialised) the weights copied for the first stages alone, the rest whole;
// the split-ahead kernel's: 4 whole but for the consumers' proxy fence; 5 neither inputs nor (after the first
// stages) weights copied, the barriers alone; 6 as 5 without the proxy fence; 7 as 5 with the inputs' planes read
// unswizzled, 8 with both operands' read swizzled; 9 whole (and right), each K-tile's descriptors its planes' first
// moved on by constants (moved()) rather than each built afresh; 10 whole but no output tile stored (what the stores
// cost where a tile has few K-tiles: Winograd's products, 1x1 layers)
#define CONVKIT_PART_BARRIERS_ALONE (CONVKIT_WG_PART >= 5 && CONVKIT_WG_PART <= 8)
#define CONVKIT_PART_NO_INPUTS (CONVKIT_WG_PART == 1 || CONVKIT_PART_BARRIERS_ALONE)
#define CONVKIT_PART_NO_WEIGHTS (CONVKIT_WG_PART == 3 || CONVKIT_PART_BARRIERS_ALONE)
#define CONVKIT_PART_NO_FENCE (CONVKIT_WG_PART == 4 || CONVKIT_WG_PART == 6)
#ifndef CONVKIT_WG_TIMELINE  // scripts/wgmma_probe.py alone: 1 the gathering kernel's blocks stamp their phases
#define CONVKIT_WG_TIMELINE 0  // past the output's end (CONVKIT_STAMP; the output right, the buffer longer)
#endif
// With CONVKIT_WG_TIMELINE, slot `slot` of this block's TIMELINE_STAMPS stamps set to `value` (%clock64, the SM's
// cycles, or %globaltimer, nanoseconds on the GPU's clock: timeline_ns), for where a call of a few K-tiles spends its
// time.
#if CONVKIT_WG_TIMELINE && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CONVKIT_STAMP(slot, value) (timeline[slot] = (value))
constexpr int TIMELINE_STAMPS = 10;  // (scripts/wgmma_probe.py's STAMPS)
__device__ __forceinline__ unsigned long long timeline_ns()
{
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}
#else
#define CONVKIT_STAMP(slot, value) ((void)0)
#endif

namespace wgmma_tf32x3 {
using namespace wgmma;
constexpr int R = CONVKIT_R, S = CONVKIT_S, RS = R * S;
constexpr int BM = 128, BN = CONVKIT_WG_N, BK = 32, THREADS = 256;
constexpr int KGROUPS = BK / 4;                        // 16-byte lines per row of a K-tile
constexpr int PLANE_A = BM * BK, PLANE_B = BN * BK;    // floats of one operand plane of a stage
constexpr int STAGE = 2 * PLANE_A + 2 * PLANE_B;       // A big, A small, B big, B small
constexpr int ACC = BN / 2;                            // accumulators a thread: 64 x BN over 128 threads
constexpr int COLUMN_STEP = THREADS / BN;              // threads staging one column of B
static_assert(BN == 128 || BN == 256, "CONVKIT_WG_N is 128 or 256");
static_assert(!(BN == 256 && CONVKIT_STAGED), "a staged 256-wide tile holds more accumulators than registers");
constexpr int STAGES = CONVKIT_STAGES;
static_assert(STAGES == 2 || (STAGES == 3 && !CONVKIT_STAGED && BN == 128),
              "three stages keep two K-tiles' products in flight: unstaged sums, 128 pixels (192 KiB)");

// Where row `row`'s k-group `kgroup` (4 floats) lies in a swizzled plane (floats from its start).
__device__ __forceinline__ int swizzled_line(int row, int kgroup) { return row * BK + (kgroup ^ (row % 8)) * 4; }

// An operand plane's layout: the canonical one without swizzle ([k-group][row][4 floats]), or the 128-byte swizzle.
enum class Layout { INTERLEAVED, SWIZZLED };

// A K-tile's 12 products on one warpgroup's 64 rows (from row `row0` of the block's A), issued as one group: A's
// big and small planes (BM rows each) at `a_planes`, B's (Width rows each) at `b_planes`, 32 floats a row. `fresh`:
// the K-tile summed apart from zero (staged), not onto `sums`. Both wgmma kernels issue them so.
//
// The small products of every k-step first, then big * big: the tensor cores truncate as they add, and a small
// product added to a sum of big ones loses up to an ulp of that sum; summed apart first, the small ones lose bits of
// a sum 2^-11 as large. A model of truncating sums (scripts/truncating_sums_model.py) puts the staged error at
// K = 2,304 at 3.3e-7 interleaved, 2.1e-7 this way (the H100: 2.9e-7 interleaved). A and B each in its `Layout`.
template <int Width, Layout LayoutA = Layout::INTERLEAVED, Layout LayoutB = Layout::INTERLEAVED, int RowsA = BM,
          int Accumulators>
__device__ __forceinline__ void k_tile_products(float (&sums)[Accumulators], const float* a_planes,
                                                const float* b_planes, int row0, bool fresh)
{
    constexpr int BIG = 0, SMALL = 1;  // the planes of each operand
    constexpr bool SWIZZLED_A = LayoutA == Layout::SWIZZLED, SWIZZLED_B = LayoutB == Layout::SWIZZLED;
    const unsigned long long a0 = SWIZZLED_A ? swizzled_descriptor(a_planes + row0 * BK)
                                             : descriptor(a_planes + row0 * 4, RowsA);
    const unsigned long long b0 = SWIZZLED_B ? swizzled_descriptor(b_planes) : descriptor(b_planes, Width);
    auto a_at = [&](int plane, int step) {  // the 64 rows of A, two k-groups from `step`
        if (CONVKIT_WG_PART == 9) return moved(a0, plane * RowsA * BK + (SWIZZLED_A ? 8 * step : 2 * step * RowsA * 4));
        const float* at = a_planes + plane * RowsA * BK;
        if constexpr (LayoutA == Layout::SWIZZLED) return swizzled_descriptor(at + row0 * BK + 8 * step);
        else return descriptor(at + 2 * step * RowsA * 4 + row0 * 4, RowsA);
    };
    auto b_at = [&](int plane, int step) {
        if (CONVKIT_WG_PART == 9) return moved(b0, plane * Width * BK + (SWIZZLED_B ? 8 * step : 2 * step * Width * 4));
        const float* at = b_planes + plane * Width * BK;
        if constexpr (LayoutB == Layout::SWIZZLED) return swizzled_descriptor(at + 8 * step);
        else return descriptor(at + 2 * step * Width * 4, Width);
    };
#pragma unroll
    for (int step = 0; step < BK / 8; ++step) {
        mma(sums, a_at(SMALL, step), b_at(BIG, step), fresh ? step > 0 : 1);
        mma(sums, a_at(BIG, step), b_at(SMALL, step), 1);
    }
#pragma unroll
    for (int step = 0; step < BK / 8; ++step) mma(sums, a_at(BIG, step), b_at(BIG, step), 1);
    commit();
}

// Shared memory written by ordinary stores and cp.async, made visible to the tensor cores' (async proxy) reads.
__device__ __forceinline__ void fence_to_async_proxy()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// 16 bytes from global to shared memory, asynchronously (zeros where not valid): past L1, or (`Cached`) kept in L1 on
// the way, where other copies of the block read the same values (the split-ahead inputs, at every tap).
template <bool Cached = false>
__device__ __forceinline__ void copy16(float* to, const float* from, bool valid)
{
#if defined(CONVKIT_EMULATED_WGMMA)
    for (int i = 0; i < 4; ++i) to[i] = valid ? from[i] : 0.0f;
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (Cached)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(to)), "l"(from),
                     "r"(valid ? 16 : 0) : "memory");
    else
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(to)), "l"(from),
                     "r"(valid ? 16 : 0));
#endif
}

__device__ __forceinline__ void copies_commit()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int Pending = 0>  // groups of copies that may still run
__device__ __forceinline__ void copies_wait()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}
// One thread's column of B (an output pixel's taps k = c R S + r S + s) in a block of Width pixels, Step threads to
// a column: its k-groups kgroup0, kgroup0 + Step, ... of each K-tile gathered into registers (gather), then split
// into a stage's two input planes, one 16-byte line per plane and k-group (store).
//
// The tap it gathers next and its offset in the image from the window's corner (c H W + r W + s) are decoded once
// and then stepped: by one within a k-group, over the other threads' k-groups between two of its own (SKIP =
// SKIP_C RS + SKIP_R S + SKIP_S), so that a K-tile's last step lands on its first tap of the next K-tile. No
// division and no multiplication in the loop. A 1x1 filter has one tap: k is the channel, HW floats apart, and
// whether the pixel's tap lies inside the image is known once; a K-tile's loads then need no stepping, and no
// channel check but in a last, partial K-tile (RS == 1: the 1x1 layers, which wait on this producer the most).
template <int Width, int Step>
struct ColumnGather {
    static constexpr int GROUPS = KGROUPS / Step;  // k-groups of a K-tile this thread stages
    static constexpr int SKIP = 4 * (Step - 1), SKIP_C = SKIP / RS, SKIP_R = SKIP % RS / S, SKIP_S = SKIP % RS % S;
    int column, kgroup0, C, H, W, HW, ih0, iw0, tap_c, tap_r, tap_s, offset;
    bool pixel_ok, in_image;  // in_image: (RS == 1) the pixel's one tap lies in the image
    const float* corner;  // dereferenced only inside the image
    float gathered[GROUPS][4];

    // `k0`: the first K it gathers (a multiple of BK: the first K-tile of a split of K)
    __device__ ColumnGather(const float* x, int thread, long long pixel0, long long pixels, long long PQ, int Q,
                            int C_, int H_, int W_, int pad, int stride, int k0 = 0)
        : column(thread % Width), kgroup0(thread / Width), C(C_), H(H_), W(W_), HW(H_ * W_)
    {
        pixel_ok = pixel0 + column < pixels;
        const unsigned pixel = (unsigned)(pixel0 + column), pq_count = (unsigned)PQ;  // the pixels lie under 2^31:
        const int n = pixel_ok ? (int)(pixel / pq_count) : 0;  // a 32-bit division (a persistent block's per tile)
        const int pq = pixel_ok ? (int)(pixel - n * pq_count) : 0;
        ih0 = (pq / Q) * stride - pad, iw0 = (pq % Q) * stride - pad;
        const int k = k0 + kgroup0 * 4;
        tap_c = k / RS, tap_r = k % RS / S, tap_s = k % RS % S;
        offset = tap_c * HW + tap_r * W + tap_s;
        corner = x + (long long)n * C * HW + (long long)ih0 * W + iw0;
        if constexpr (RS == 1) in_image = pixel_ok && (unsigned)ih0 < (unsigned)H && (unsigned)iw0 < (unsigned)W;
    }

    __device__ __forceinline__ void gather()  // this thread's k-groups of the next K-tile, into registers
    {
        if constexpr (RS == 1) {  // channels tap_c + 4 Step i + j, the K-tile's 32 from tap_c - 4 kgroup0
            const int left = C - tap_c;  // channels from this thread's first to C
            const float* at = corner + offset;
            if (in_image && left - 4 * kgroup0 >= BK) {  // every K-tile but a last: no check
#pragma unroll
                for (int i = 0; i < GROUPS; ++i, at += (4 * Step - 4) * HW)
#pragma unroll
                    for (int j = 0; j < 4; ++j, at += HW) gathered[i][j] = __ldg(at);
            } else {
#pragma unroll
                for (int i = 0; i < GROUPS; ++i, at += (4 * Step - 4) * HW)
#pragma unroll
                    for (int j = 0; j < 4; ++j, at += HW)
                        gathered[i][j] = in_image && 4 * Step * i + j < left ? __ldg(at) : 0.0f;
            }
            tap_c += BK, offset += BK * HW;
        } else {
#pragma unroll
            for (int i = 0; i < GROUPS; ++i) {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const bool inside = pixel_ok && tap_c < C && (unsigned)(ih0 + tap_r) < (unsigned)H &&
                                        (unsigned)(iw0 + tap_s) < (unsigned)W;  // k < K exactly where c < C
                    gathered[i][j] = inside ? __ldg(corner + offset) : 0.0f;
                    ++offset;
                    if (++tap_s == S) {
                        tap_s = 0, offset += W - S;
                        if (++tap_r == R) tap_r = 0, ++tap_c, offset += HW - R * W;
                    }
                }
                if (SKIP) {  // each part carries at most once
                    tap_s += SKIP_S, offset += SKIP_S;
                    if (tap_s >= S) tap_s -= S, ++tap_r, offset += W - S;
                    tap_r += SKIP_R, offset += SKIP_R * W;
                    if (tap_r >= R) tap_r -= R, ++tap_c, offset += HW - R * W;
                    tap_c += SKIP_C, offset += SKIP_C * HW;
                }
            }
        }
    }

    // On past `k_tiles` K-tiles without reading them (the other producer half's: PRODUCER_HALVES).
    __device__ __forceinline__ void skip(int k_tiles)
    {
        if constexpr (RS == 1) {
            tap_c += BK * k_tiles, offset += BK * k_tiles * HW;
        } else {
            const int k = tap_c * RS + tap_r * S + tap_s + BK * k_tiles;
            tap_c = k / RS, tap_r = k % RS / S, tap_s = k % RS % S;
            offset = tap_c * HW + tap_r * W + tap_s;
        }
    }

    // The big plane, then the small one, split as the inputs split ahead are (tf32::split_ahead).
    __device__ __forceinline__ void store(float* b_planes) const
    {
#pragma unroll
        for (int i = 0; i < GROUPS; ++i) {
            float4 big, small;
            const float(&g)[4] = gathered[i];
            tf32::split_ahead(make_float4(g[0], g[1], g[2], g[3]), big, small);
            const int line = ((kgroup0 + Step * i) * Width + column) * 4;
            *reinterpret_cast<float4*>(b_planes + line) = big;
            *reinterpret_cast<float4*>(b_planes + Width * BK + line) = small;
        }
    }
};
// A warpgroup's 64 rows of a block's Width-pixel tile into out (NMPQ), the bias added, from the accumulators' layout
// (wgmma m64nN f32): warp w of the group holds rows 16 w + lane / 4 and + 8; each 8 columns j a pair at
// 8 j + 2 (lane % 4): acc[4 j], [4 j + 1] on the first row, [4 j + 2], [4 j + 3] on the second.
//
// Where the tile lies whole in one image (every tile of Winograd's products, whose N is 1, and most of a convolution's)
// a row's columns lie together: each row's address is made once and its pairs stored as float2 where the image's
// pixels are even in number (each warp's store then fills whole 32-byte sectors), as floats where not. A tile over an
// image's end walks its pixels in order, its image and pixel in it stepped on from the first (by 1, or 7 to the next
// pair), not divided out each: a 64-bit division per value made this epilogue some 3,600 instructions a warp, the
// tensor cores idle meanwhile; the stepping alone still cost some 22 instructions a value, which on a GEMM of 8
// K-tiles (Winograd's products at 256 channels) was a quarter of the kernel's time (H200, 2026-11-28). 32-bit
// throughout: out (pixels x M) lies under 2^31 elements; the pixel within its image unsigned, so that a step past the
// last of an image of nearly 2^31 does not overflow.
template <int Width>
__device__ __forceinline__ void store_tile(const float (&acc)[Width / 2], float* out, const float* bias, int row0,
                                           int M, long long pixel0, long long pixels, long long PQ, int thread)
{
    const int lane = thread % 32, warp = thread / 32;
    const unsigned pq_count = (unsigned)PQ;
    const int tile_image = (int)pixel0 / (int)pq_count;
    const unsigned tile_pq = (unsigned)((int)pixel0 - tile_image * (int)pq_count);
    if (tile_pq + Width <= pq_count) {  // the whole tile in one image (so within `pixels` too)
        // each pair's address a multiple of 8 bytes (an out at an odd float, a view's, takes the floats): a float2
        const bool pairs = pq_count % 2 == 0 && reinterpret_cast<unsigned long long>(out) % 8 == 0;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int m = row0 + warp * 16 + lane / 4 + 8 * half;
            if (m >= M) continue;
            const float add = bias != nullptr ? bias[m] : 0.0f;
            float* row = out + (tile_image * M + m) * (int)pq_count + (int)tile_pq + 2 * (lane % 4);
#pragma unroll
            for (int j = 0; j < Width / 8; ++j) {
                const float first = acc[4 * j + 2 * half] + add, second = acc[4 * j + 2 * half + 1] + add;
                if (pairs) {
                    *reinterpret_cast<float2*>(row + 8 * j) = make_float2(first, second);
                } else {
                    row[8 * j] = first;
                    row[8 * j + 1] = second;
                }
            }
        }
        return;
    }
    const int first = (int)pixel0 + 2 * (lane % 4), left = (int)pixels - first;  // its pixels past `first`: < left
    const int first_image = first / (int)pq_count;
    const unsigned first_pq = (unsigned)(first - first_image * (int)pq_count);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int m = row0 + warp * 16 + lane / 4 + 8 * half;
        if (m >= M) continue;
        const float add = bias != nullptr ? bias[m] : 0.0f;
        int image = first_image;
        unsigned pq = first_pq;
#pragma unroll
        for (int j = 0; j < Width / 8; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                if (j + e > 0) {  // the next pixel: 1 on within a pair, 7 on to the next pair
                    pq += e == 1 ? 1 : 7;
                    while (pq >= pq_count) pq -= pq_count, ++image;
                }
                if (8 * j + e < left) out[(image * M + m) * (int)pq_count + (int)pq] = acc[4 * j + 2 * half + e] + add;
            }
        }
    }
}

// A warp's 16 rows of a warpgroup's Width-pixel tile into out (NMPQ), the bias added, through `rows`, the warp's own
// ROWS_STAGED x (Width + 8) floats of shared memory: each 8 rows written there from the accumulators' layout (as
// store_tile reads it), then read back a row at a time, lane l taking pixels l, l + 32, ..., so that each store of the
// warp writes 32 consecutive pixels of one row, 128 bytes, whatever the image's size. store_tile's pairs of an image of
// an odd pixel count (7 x 7, 13 x 13, 27 x 27: 129 of the 3xTF32 chapter's 349 1x1 layers) go a float at a time to
// addresses of both parities: ncu counted 7.9 million store sectors on a layer of 27 x 27 pixels against 2.9 on one of
// 28 x 28 (72 and 77 MB of output), 142 us against 73 (H200, 2026-12-02); this way 2.75 and 2.41 million, 70 us and 69
// (scripts/store_sectors.py), and over a third of those layers (117) the gathering kernel persistent ran 1.04x at the
// median (1.09x on images of odd pixel counts, 1.03x on the others; 0.88-0.95x on a few of 54 x 54 or 224 x 224 pixels
// and at most 64 filters, which the store all but makes up: scripts/wgmma_probe.py --ones). Each of its Width / 32
// pixels' places in out (image and position) is worked out once a tile, so that a tile over an image's end takes no
// other path. The row pitch, Width + 8 floats, keeps both the writes (a half-warp's float2s over 4 rows) and the reads
// free of bank conflicts; the warp's lanes meet (__syncwarp) before the writes, which overwrite the last rows' (or the
// last tile's), and before the reads. (Four consecutive pixels a lane as one float4, where an image's pixels are a
// multiple of 4, was no faster: 0.99x the float a lane at the median of 48 such 1x1 layers, H200, 2026-12-02; commit
// a1a4ca7, reverted.)
constexpr int ROWS_STAGED = 8;

// Pixel `pixel`'s place in out (NMPQ) at filter 0: image M PQ + pq (out lies under 2^31; the pixels too), -1 past
// the last pixel.
__device__ __forceinline__ int pixel_place(unsigned pixel, int M, long long pixels, unsigned pq_count)
{
    const unsigned image = pixel / pq_count;
    return pixel < (unsigned long long)pixels ? (int)(image * (unsigned)M * pq_count + (pixel - image * pq_count)) : -1;
}

// Lane `lane`'s pixels of a Width-pixel tile (pixel0 + lane, + 32, ...), their places in out (pixel_place).
template <int Width>
__device__ __forceinline__ void lane_pixels(int (&at)[Width / 32], int lane, int M, long long pixel0, long long pixels,
                                            unsigned pq_count)
{
#pragma unroll
    for (int c = 0; c < Width / 32; ++c) at[c] = pixel_place((unsigned)pixel0 + lane + 32 * c, M, pixels, pq_count);
}

template <int Width>
__device__ __forceinline__ void store_tile_staged(const float (&acc)[Width / 2], float* out, const float* bias,
                                                  int row0, int M, long long pixel0, long long pixels, long long PQ,
                                                  int thread, float* rows)
{
    constexpr int PITCH = Width + 8, PER_LANE = Width / 32;
    const int lane = thread % 32, warp = thread / 32;
    const unsigned pq_count = (unsigned)PQ;
    int at[PER_LANE];
    lane_pixels<Width>(at, lane, M, pixel0, pixels, pq_count);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        __syncwarp();  // the warp's reads of its last rows done
#pragma unroll
        for (int j = 0; j < Width / 8; ++j)
            *reinterpret_cast<float2*>(rows + lane / 4 * PITCH + 8 * j + 2 * (lane % 4)) =
                make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
        __syncwarp();
#pragma unroll
        for (int r = 0; r < ROWS_STAGED; ++r) {
            const int m = row0 + warp * 16 + 8 * half + r;
            if (m >= M) break;  // (the same for the whole warp)
            const float add = bias != nullptr ? bias[m] : 0.0f;
#pragma unroll
            for (int c = 0; c < PER_LANE; ++c)
                if (at[c] >= 0) out[at[c] + m * (int)pq_count] = rows[r * PITCH + lane + 32 * c] + add;
        }
    }
}
}  // namespace wgmma_tf32x3

extern "C" __global__ void __launch_bounds__(256, 1)
implicit_gemm_wgmma_tf32x3(const float* __restrict__ x, const float* __restrict__ planes,
                           const float* __restrict__ bias, float* __restrict__ out, int N, int C, int H, int W,
                           int M, int P, int Q, int pad, int stride)
{
#if defined(CONVKIT_WGMMA_BODY)
    using namespace wgmma_tf32x3;
    extern __shared__ __align__(128) float smem[];
    const int K = C * RS, KP = (K + 3) / 4 * 4, tiles = (K + BK - 1) / BK;
    const long long PQ = (long long)P * Q, pixels = (long long)N * PQ;
    const int tid = threadIdx.x, group = tid / 128;
    const long long pixel0 = (long long)blockIdx.x * BN;
    const int m0 = blockIdx.y * BM;

    ColumnGather<BN, COLUMN_STEP> inputs(x, tid, pixel0, pixels, PQ, Q, C, H, W, pad, stride);
    auto stage_weights = [&](float* stage, int tile) {  // both planes' 128 rows x 8 k-groups, 8 lines a thread
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int line = tid + i * THREADS, plane = line / (BM * KGROUPS), rest = line % (BM * KGROUPS);
            const int kgroup = rest / BM, row = rest % BM, m = m0 + row, k = tile * BK + kgroup * 4;
            const bool valid = m < M && k < KP;
            const float* from = planes + (long long)plane * M * KP + (valid ? (long long)m * KP + k : 0);
            copy16(stage + plane * PLANE_A + (kgroup * BM + row) * 4, from, valid);
        }
        copies_commit();
    };

    float acc[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
#if CONVKIT_STAGED
    float partial[ACC];
#else
    float (&partial)[ACC] = acc;  // the products summed on into the block's accumulators
#endif

    auto issue_products = [&](const float* stage) {  // a K-tile's 12 products on this warpgroup's rows
        k_tile_products<BN>(partial, stage, stage + 2 * PLANE_A, group * 64, CONVKIT_STAGED);
    };
    auto stage = [&](int tile) {  // K-tile `tile` into its stage: the weights' copies, the inputs gathered and split
        float* to = smem + (tile % STAGES) * STAGE;
        stage_weights(to, tile);
        if (!CONVKIT_PART_NO_INPUTS) {
            inputs.gather();
            inputs.store(to + 2 * PLANE_A);
        }
    };

    for (int tile = 0; tile < STAGES - 1 && tile < tiles; ++tile) stage(tile);
    copies_wait();
    fence_to_async_proxy();
    __syncthreads();

    for (int tile = 0; tile < tiles; ++tile) {
        fence_operands();  // the products first, as soon as the stage is ready; the next stage staged behind them
        if (CONVKIT_WG_PART != 2) issue_products(smem + (tile % STAGES) * STAGE);
        const int ahead = tile + STAGES - 1;  // the K-tile staged now, into the stage the oldest products read
        if (STAGES == 2) {
            if (ahead < tiles) stage(ahead);  // no product reads its stage now
            wait();
#if CONVKIT_STAGED
#pragma unroll
            for (int i = 0; i < ACC; ++i) acc[i] += partial[i];
#endif
            if (ahead < tiles) copies_wait();
        } else {
            wait<1>();        // this warpgroup's products of the K-tile before are done,
            __syncthreads();  // and the other's: no product reads the stage written next
            if (ahead < tiles) {
                stage(ahead);
                copies_wait<1>();  // the next K-tile's copies arrived; this one's may still run
            } else {
                copies_wait();
            }
        }
        fence_to_async_proxy();
        __syncthreads();
    }
    wait();

    store_tile<BN>(acc, out, bias, m0 + group * 64, M, pixel0, pixels, PQ, tid % 128);
#endif
}

// ---------------------------------------------------------------------------------------------
// The warp-specialised kernel, implicit_gemm_wgmma_ws_tf32x3: a block of three warpgroups, one producer and two
// consumers, over WS_STAGES stages of shared memory, each stage's turn kept by two mbarriers. The producer stages a
// K-tile as the consumers multiply an earlier one: the weights (split ahead into the stage's own layout,
// split_weights_tiled_tf32x3) in one bulk copy of 32 KiB that the stage's "full" barrier counts in bytes, the inputs
// gathered, split and stored by its 128 threads, one pixel each, which then arrive on it. Each consumer waits for
// it, issues its 64 rows' 12 products (staged: summed apart, then added in FP32), waits for them and arrives on the
// stage's "empty" barrier, which the producer waits for before it writes the stage again. 128 pixels a block. With
// CONVKIT_WS_IN_FLIGHT=2 a consumer waits for a K-tile's products only once the next K-tile's are issued, adding
// their sums as those run: two sets of sums, in registers the producer gives up (setmaxnreg). With
// CONVKIT_WS_PERSISTENT, a block an SM over the output tiles, as the split-ahead kernel's; with CONVKIT_WS_FILTERS=64,
// 64 filters a block (a bulk copy of 16 KiB a K-tile), its consumers taking alternate K-tiles, as that kernel's at 64
// (for layers of at most 64 filters, which a block of 128 leaves half idle). A block a tile, its K may be
// split over gridDim.z (each split's sums a plane of partial outputs, which sum_planes adds up): for layers of few
// output tiles and many K-tiles, which leave most SMs idle. With CONVKIT_WS_FILTERS=32 or 16 (PIXEL_ROWS), the
// products' rows are the block's 128 pixels (64 a consumer) and their columns its filters: layers of that few filters.
// (The weights' split ahead costs a launch, some 3 us a call in the study's timing on the H200. Split in this kernel
// instead, copied as they lie by the producer's cp.async and split once staged, it was slower on the 3xTF32 chapter's
// 1x1 layers, where that launch weighs most: split by each consumer, its 64 rows behind a barrier of its own, the
// persistent setting ran 0.80x the split-ahead weights' speed at the median of 117 layers (faster on 7); split by the
// producer once its own copies had landed, 0.72x (faster on 3), and a block a tile 0.76x on 11 of the chapter's
// layers of >= 20 GFLOP, the producer setting their pace. H200, 2026-12-02, scripts/wgmma_probe.py --ones and
// --ones-anatomy; commits e52c577 and 32fe742, reverted.)
namespace wgmma_ws {
using namespace wgmma_tf32x3;
constexpr int FILTERS = CONVKIT_WS_FILTERS;
static_assert(FILTERS == 128 || FILTERS == 64 || FILTERS == 32 || FILTERS == 16,
              "a block's filters: 128, 64, 32 or 16");
constexpr bool NARROW = FILTERS == 64;  // a consumer multiplies each of its stages on all the block's 64 filters
// At 32 or 16 filters, fewer than a wgmma's 64 rows, the block's pixels are the products' rows (A) and its filters
// their columns (B, N = FILTERS): each consumer multiplies its 64 of the tile's pixels on all the filters
// (consume_pixel_rows).
constexpr bool PIXEL_ROWS = FILTERS <= 32;
// At 64 filters, the consumers take alternate output tiles (PINGPONG: each tile's store beside the other consumer's
// products, for layers of few K-tiles a tile, whose stores weigh most), or else alternate K-tiles of each (SPLIT_K).
constexpr bool PINGPONG = CONVKIT_WS_PINGPONG, SPLIT_K = NARROW && !PINGPONG;
static_assert(!PINGPONG || (NARROW && CONVKIT_WS_PERSISTENT), "ping-pong: 64 filters a block, persistent");
// The block's pixels: 128, or 64 at 64 filters with ping-pong, where a layer of few output tiles would leave most SMs
// idle (28 x 28 512->512 at batch 1: 56 tiles of 64 by 128 on 132 SMs; CUTLASS's 64 by 64 tile runs it in 104).
constexpr int WIDTH = CONVKIT_WS_WIDTH, PLANE_A_WS = FILTERS * BK, PLANE_B_WS = WIDTH * BK;
static_assert(WIDTH == 128 || (WIDTH == 64 && PINGPONG), "64 pixels a block: 64 filters with ping-pong alone");
constexpr int STAGE_WS = 2 * PLANE_A_WS + 2 * PLANE_B_WS;  // 1,024-byte multiples: a stage's planes stay aligned
constexpr int WS_STAGES = NARROW || PIXEL_ROWS ? 4 : 3;  // (smaller stages at 64 filters or fewer: one more)
constexpr int PRODUCERS = 128, CONSUMERS = 256, WS_THREADS = PRODUCERS + CONSUMERS;
constexpr int RELEASERS = NARROW ? 128 : CONSUMERS;  // the threads that multiply a stage, then free it
constexpr unsigned WEIGHT_BYTES = 2 * PLANE_A_WS * 4;  // a K-tile's two weight planes, as they lie in a stage
// (A stage in two parts of 16 k, each with its barriers, so that two K-tiles in flight hold one stage and the producer
// stages further ahead, was measured slower: 0.78-0.99x on the 3xTF32 chapter's 110 large layers, H200, 2026-11-28.)
// Past the stages: their barriers (and with SPLIT_K two more, for the consumers' sums), 128 bytes; with SPLIT_K then
// the second consumer's sums, 64 x 128 floats, for the first to add; else the consumer warps' rows (staged_rows).
constexpr int BARRIER_FLOATS = 32;  // 16 barriers: full, empty, the sums' two (PINGPONG: the turn) and split
constexpr int IN_FLIGHT = CONVKIT_WS_IN_FLIGHT;
constexpr bool INPUTS_FP32 = CONVKIT_WS_INPUTS_FP32;
static_assert(IN_FLIGHT == 1 || IN_FLIGHT == 2, "a consumer keeps one or two K-tiles of products running");
// The gathering kernel's producer in two halves of 64 threads, each staging every other K-tile, a thread two pixels'
// columns of it (64 values): two K-tiles of loads in flight, one a half, for a 1x1 layer of few filters, whose time
// is its inputs' read (H200, ncu: DRAM 31% busy, the producer's warps stalled most on their loads). A thread's loads
// of the next K-tile issued before it splits and stores this one stay in flight only so far: the proxy fence before
// each arrival (fence_to_async_proxy, MEMBAR.ALL.CTA in SASS) waits for every load of the thread; a half's fence waits
// for its own alone, the other half's running on. H200, 2026-12-03, cuConv's 1x1 layers of at most 64 filters: the
// next K-tile in a second set of a thread's registers 1.03-1.10x over the rest on 29 of 94 (batch 16 or more), the
// halves 1.02-1.10x faster still where both ran; the loads copied by 4-byte cp.async into the stage (which that fence
// does not wait for) and split there, 0.91x. Its registers stay its own: one K-tile of products in flight a consumer,
// or the pixels on the products' rows (few accumulators).
//
// A half's wait for a stage tells its phases apart by parity alone: it holds while the consumers free the stages in
// order and a half's turns are at most three apart (three across an output tile of an odd count of K-tiles), with
// three stages or more. Not with SPLIT_K's consumers on alternate K-tiles: each half and its consumer then run apart
// on every other stage, and an odd count of K-tiles swaps their stages at the next output tile, where the one ahead
// may pass the other's turn by two phases (persistent at 64 filters, on the H200: an unspecified launch failure,
// 14x14 at batch 128 of 480 and 528 channels; in the emulator with the first half behind, a wrong output).
constexpr bool HALVES = CONVKIT_WS_PRODUCER_HALVES;
constexpr int STAGERS = HALVES ? PRODUCERS / 2 : PRODUCERS;  // the producer threads that stage one K-tile
static_assert(!HALVES || ((IN_FLIGHT == 1 || PIXEL_ROWS) && !INPUTS_FP32 && !SPLIT_K && WS_STAGES >= 3),
              "producer halves: one K-tile of products in flight or pixel rows; consumers on every K-tile");
// A call of a few K-tiles a block spends 0.6-0.8 us more on the weights' split ahead, its own launch, than its kernel
// alone (H200, the 3xTF32 chapter's batch-1 1x1 layers). With WEIGHTS_IN_BLOCK the kernel takes w as given and its
// consumers, idle until the first stage is full, split the block's weights into the stages themselves as the producer
// gathers the inputs (split_block_weights): a call one launch. A block a tile of at most WS_STAGES K-tiles (each its
// own stage; the kernel traps if not), the pixels on the rows, the whole main loop. Over the weights split ahead, the
// whole call 1.051x at the geometric mean, faster on 56 of the 61 1x1 layers timed (H200, 2026-12-05).
constexpr bool WEIGHTS_IN_BLOCK = CONVKIT_WS_WEIGHTS_IN_BLOCK;
static_assert(!WEIGHTS_IN_BLOCK || (PIXEL_ROWS && !CONVKIT_WS_PERSISTENT && CONVKIT_WG_PART == 0),
              "weights split in the block: the pixels on the rows, a block a tile, the whole main loop");
// Two K-tiles of products in flight and the accumulators of 128 or 64 filters a consumer: more registers than a block
// of 384 threads gives each, taken from the producer (set_register_limit).
constexpr bool REGISTERS_TO_CONSUMERS = IN_FLIGHT == 2 && !HALVES;
static_assert(!(INPUTS_FP32 && SPLIT_K), "the consumers split a stage together: both take every K-tile (128 filters)");
static_assert(!(PIXEL_ROWS && INPUTS_FP32), "the pixels on the products' rows: the inputs split by the producer");

// A warpgroup's registers a thread raised (the consumers) or lowered (the producer) to `Count`. Two K-tiles of sums
// in flight and the accumulators are 192 registers a consumer thread, more than the 168 a block of 384 threads
// gets: the producer, which needs few, gives its share up (the gathering kernel 56 + 2 x 224 = 3 x 168; the
// split-ahead one, whose producer keeps its pixels' corners over a loop of output tiles, 64 + 2 x 216 < 3 x 168).
// ptxas allocates each side's code within its count where the kernel's launch bounds fix the threads.
template <bool Raise, int Count>
__device__ __forceinline__ void set_register_limit()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (Raise)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Count));
    else
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Count));
#endif
}

__device__ __forceinline__ void barrier_init(unsigned long long* bar, int count)
{
#if defined(CONVKIT_EMULATED_WGMMA)
    emu::mbarrier_init(bar, count);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count) : "memory");
#endif
}

// The initialised barriers made visible to the other threads and to the bulk copies (the async proxy).
__device__ __forceinline__ void barriers_ready()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
    __syncthreads();
}

__device__ __forceinline__ void arrive(unsigned long long* bar)
{
#if defined(CONVKIT_EMULATED_WGMMA)
    emu::mbarrier_arrive(bar, 0);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(shared_address(bar))
                 : "memory");
#endif
}

// An arrival that also says how many bytes the phase waits for (the bulk copy's).
__device__ __forceinline__ void arrive_expecting(unsigned long long* bar, unsigned bytes)
{
#if defined(CONVKIT_EMULATED_WGMMA)
    emu::mbarrier_arrive(bar, bytes);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n"
                 ::"r"(shared_address(bar)), "r"(bytes) : "memory");
#endif
}

// Until the barrier's phase of this parity is complete.
__device__ __forceinline__ void wait_phase(unsigned long long* bar, unsigned parity)
{
#if defined(CONVKIT_EMULATED_WGMMA)
    emu::mbarrier_wait(bar, parity);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    unsigned done = 0;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
    } while (!done);
#endif
}

// `bytes` from global to shared memory by the copy engine, counted on `bar` as they land.
__device__ __forceinline__ void bulk_copy(float* to, const float* from, unsigned bytes, unsigned long long* bar)
{
#if defined(CONVKIT_EMULATED_WGMMA)
    emu::bulk_copy(to, from, bytes, bar);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(shared_address(to)), "l"(from), "r"(bytes), "r"(shared_address(bar)) : "memory");
#endif
}

// With SPLIT_K, the two barriers after the stages' "empty" ones: the second consumer's sums written, then read by
// the first (add_consumers_sums).
__device__ __forceinline__ unsigned long long* sums_barriers(unsigned long long* empty) { return empty + WS_STAGES; }

// With INPUTS_FP32, after those: each stage's "split" barrier, on which the consumers arrive once they have written
// its small plane (split_inputs).
__device__ __forceinline__ unsigned long long* split_barriers(unsigned long long* empty)
{
    return empty + WS_STAGES + 2;
}

// The stages' barriers, initialised by thread 0 (each "full": the producer's threads and the bulk copy's arrival;
// each "empty": the RELEASERS that multiplied the stage; with SPLIT_K the sums' two) and made visible to every thread
// and to the copy engines.
__device__ __forceinline__ void init_barriers(unsigned long long* full, unsigned long long* empty)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < WS_STAGES; ++s) {
            barrier_init(full + s, STAGERS + (WEIGHTS_IN_BLOCK ? CONSUMERS : 1));  // (and the weights' bulk copy,
                                                                                  // or the consumers that split them)
            barrier_init(empty + s, RELEASERS);
        }
        if (SPLIT_K) {
            barrier_init(sums_barriers(empty), 128);
            barrier_init(sums_barriers(empty) + 1, 128);
        }
        if (PINGPONG) barrier_init(sums_barriers(empty), 128);  // (takes_tile)
        if (INPUTS_FP32)
            for (int s = 0; s < WS_STAGES; ++s) barrier_init(split_barriers(empty) + s, CONSUMERS);
    }
    barriers_ready();
}

// The weights' K-tile `tile` into stage `s` by one bulk copy (the `leader`: thread 0 of the producer, or of its half),
// counted in bytes on its "full" barrier, once its "empty" barrier says the consumers are done with the stage's last
// K-tile. `turn`: the block's K-tiles staged before this one (over every output tile it has computed), which the
// barriers' phases count. (At 32 or 16 filters the producer's threads read the weights as given and split them as
// they staged them instead, a call one launch, no split ahead: slower, 0.78x at the median of 43 of cuConv's 1x1
// layers, faster on 3, at most 1.06x; H200, 2026-12-03. Each copy issued 1 or 2 of the producer's K-tiles ahead of
// its gathers, once its stage was freed, rather than beside them: faster on none of the 14 batch-1 1x1 layers where
// it built (as fast on one), slower on the deep ones, 7x7 2,048->512 29.2-30.7 us against 21.8, 7x7 512->2,048
// 19.3-21.6 against 16.3; H200, 2026-12-04, commit 4e9e439, reverted.)
__device__ __forceinline__ void acquire_and_copy_weights(float* stage, const float* weights, int tile, int turn,
                                                        int s, unsigned long long* full, unsigned long long* empty,
                                                        bool leader = threadIdx.x == 0)
{
    if (turn >= WS_STAGES) wait_phase(empty + s, (turn / WS_STAGES + 1) & 1);
    if (CONVKIT_PART_NO_WEIGHTS && turn >= WS_STAGES) {  // what the weights' traffic costs: none after the first stages
        if (leader) arrive(full + s);
    } else if (leader) {
        arrive_expecting(full + s, WEIGHT_BYTES);
        bulk_copy(stage, weights + (long long)tile * (2 * PLANE_A_WS), WEIGHT_BYTES, full + s);
    }
}

// Row m's k-group `kgroup` of K-tile `tile` of w, split by the weights' rule (tf32::split_ahead) into `big` and
// `small`: zeros past M and where `source(m, tile, k)`, the index in w of row m's k-th value of the K-tile, is -1;
// one 16-byte load where its 4 values lie so in w. The tiled split's (split_weights_tiled) and the block's own
// (split_block_weights).
template <typename Source>
__device__ __forceinline__ void split_weight_line(const float* __restrict__ w, int M, int m, int tile, int kgroup,
                                                  Source source, float4& big, float4& small)
{
    big = make_float4(0.0f, 0.0f, 0.0f, 0.0f), small = big;
    const long long at = m < M ? source(m, tile, kgroup * 4) : -1;
    const bool whole = at >= 0 && source(m, tile, kgroup * 4 + 3) == at + 3 &&
                       reinterpret_cast<unsigned long long>(w + at) % 16 == 0;  // (affine in k: its 4 values)
    if (whole) {
        tf32::split_ahead(*reinterpret_cast<const float4*>(w + at), big, small);
    } else if (m < M) {
        float b[4] = {0.0f, 0.0f, 0.0f, 0.0f}, s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const long long from = source(m, tile, kgroup * 4 + j);
            if (from >= 0) tf32::split_ahead(w[from], b[j], s[j]);
        }
        big = make_float4(b[0], b[1], b[2], b[3]), small = make_float4(s[0], s[1], s[2], s[3]);
    }
}

// The gathering kernel's K-tiles of w (MCRS, K = C R S; a Source of split_weight_line): K-tile t holds k = 32 t ..
// 32 t + 31 of each row, zeros past K.
struct RowsOfK {
    int K;
    __device__ long long operator()(int m, int tile, int k) const
    {
        k += tile * BK;
        return k < K ? (long long)m * K + k : -1;
    }
};

// With WEIGHTS_IN_BLOCK, by the consumers: the block's weights (w as given, MCRS, K = C R S; filters m0 on, its
// `tiles` K-tiles from tile0) split into the stages, K-tile t into stage t, as split_weights_tiled lays them out and
// the bulk copy brings them, a k-group line a thread in turn; then each consumer thread's arrival on every K-tile's
// "full" barrier (counted with the producer's stagers').
__device__ __forceinline__ void split_block_weights(float* smem, const float* w, int M, int K, int m0, int tile0,
                                                    int tiles, unsigned long long* full)
{
    if (tiles > WS_STAGES) __trap();  // (a stage a K-tile: the launch refuses more)
    for (int i = threadIdx.x - PRODUCERS; i < tiles * KGROUPS * FILTERS; i += CONSUMERS) {
        const int kgroup = i % KGROUPS, row = i / KGROUPS % FILTERS, tile = i / (KGROUPS * FILTERS);
        float4 big, small;
        split_weight_line(w, M, m0 + row, tile0 + tile, kgroup, RowsOfK{K}, big, small);
        float* line = smem + tile * STAGE_WS + wgmma_operands::tiled_line(0, kgroup, row, FILTERS);
        *reinterpret_cast<float4*>(line) = big;
        *reinterpret_cast<float4*>(line + PLANE_A_WS) = small;
    }
    fence_to_async_proxy();  // the stores, visible to the tensor cores' reads
    for (int t = 0; t < tiles; ++t) arrive(full + t);
}

// With SPLIT_K, the consumers' sums of an output tile added: the second's written to shared memory (`sums`), then
// read and added by the first, which stores the tile; sums_barriers order the turns. `round`:
// the block's output tiles before this one. Whether this thread stores the tile.
__device__ __forceinline__ bool add_consumers_sums(float (&acc)[WIDTH / 2], float* sums, unsigned long long* empty,
                                                   int group, int round)
{
    if constexpr (!SPLIT_K) return true;
    unsigned long long *written = sums_barriers(empty), *read = written + 1;
    const int lane = threadIdx.x % 128;  // a float of each row of `sums` a thread: a warp's 32 in a line
    if (group == 1) {
        if (round > 0) wait_phase(read, (round - 1) & 1);  // the first consumer has the last tile's sums
#pragma unroll
        for (int i = 0; i < WIDTH / 2; ++i) sums[i * 128 + lane] = acc[i];
        arrive(written);
        return false;
    }
    wait_phase(written, round & 1);
#pragma unroll
    for (int i = 0; i < WIDTH / 2; ++i) acc[i] += sums[i * 128 + lane];
    arrive(read);
    return true;
}

// With PINGPONG, whether the block's output tile `round` is consumer `group`'s; and if so, once the other consumer
// has waited for the stages of the tile before (its turn passed on by the first of sums_barriers). Each consumer
// waits for its stages' "full" phases by parity, so a stage's phase it waits for must be the barrier's next: had the
// second consumer waited for its first tile's stages at once, a stage's parity would have matched two phases early.
__device__ __forceinline__ bool takes_tile(unsigned long long* empty, int round, int group)
{
    if constexpr (!PINGPONG) return true;
    if (round % 2 != group) return false;
    if (round > 0) wait_phase(sums_barriers(empty), (round - 1) & 1);
    return true;
}

// With CONVKIT_WS_CLUSTER, the K splits of an output tile (a block a tile, gridDim.z splits) are one thread-block
// cluster, which adds their sums rather than planes of partial outputs and a second kernel (sum_planes): each block's
// consumers leave their sums in its stages' place (leave_sums: the tile's 128 rows of 128 pixels, SUMS_PITCH floats a
// row, written as store_tile_staged writes its rows; with PIXEL_ROWS its FILTERS rows, leave_pixel_row_sums), then
// past the cluster's barrier add up their block's share of the rows over the cluster's blocks, in rank order as
// sum_planes adds its planes (the same output, bit for bit), add the bias and store them (add_cluster_sums); a second
// barrier keeps each block's shared memory until the others have read it. Rank r of the cluster is split r of K (the
// cluster spans gridDim.z). It saves the second kernel's launch and the planes' traffic, and costs the blocks' wait
// for their cluster's last: on the H200, the 3xTF32 chapter's 1x1 layers where the tiles' clusters all run at once,
// 1.08x the planes' speed at the median in 8 splits (54 layers, never slower), 1.03x in 4 (87); past one wave of
// clusters 0.8-0.95x (scripts/wgmma_probe.py --ones --clustered, 2026-12-02).
constexpr int CLUSTER = CONVKIT_WS_CLUSTER, SUMS_PITCH = WIDTH + 8;
static_assert(CLUSTER == 0 || (CLUSTER >= 2 && CLUSTER <= 8 && (FILTERS == 128 || PIXEL_ROWS) &&
                                !CONVKIT_WS_PERSISTENT),
              "a K split over a cluster: 2 to 8 splits (a portable cluster), 128 filters a block or the pixels on the "
              "products' rows, a block a tile");
static_assert(FILTERS * SUMS_PITCH <= WS_STAGES * STAGE_WS, "the tile's sums lie in its stages' place");

// The consumers' own barrier (the producer's warps not among them): named barrier 1, 256 threads.
__device__ __forceinline__ void consumers_sync()
{
#if defined(CONVKIT_EMULATED_NAMED_BARRIER)
    CONVKIT_EMULATED_NAMED_BARRIER(1, CONSUMERS);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("bar.sync 1, %0;\n" ::"n"(CONSUMERS) : "memory");
#endif
}

// A consumer's sums of its 64 rows (from row0) into the block's tile of sums, in its stages' place once both
// consumers' products are done (every product of the tile waited for: the stages are free).
__device__ __forceinline__ void leave_sums(const float (&acc)[WIDTH / 2], float* sums, int row0)
{
    consumers_sync();
    const int lane = threadIdx.x % 32, row = row0 + (threadIdx.x - PRODUCERS) % 128 / 32 * 16 + lane / 4;
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int j = 0; j < WIDTH / 8; ++j)
            *reinterpret_cast<float2*>(sums + (row + 8 * half) * SUMS_PITCH + 8 * j + 2 * (lane % 4)) =
                make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
}

// With PIXEL_ROWS, a consumer's sums (its 64 pixels, from 64 group, by the block's FILTERS filters) into the block's
// tile of sums as leave_sums lays it out (a row a filter, a column a pixel), once both consumers' products are done.
// A thread's accumulators are pixels lane / 4 and + 8 of its warp's 16, filters 8 j + 2 (lane % 4) and + 1.
__device__ __forceinline__ void leave_pixel_row_sums(const float (&acc)[FILTERS / 2], float* sums, int group)
{
    consumers_sync();
    const int lane = threadIdx.x % 32, pixel = group * 64 + (threadIdx.x - PRODUCERS) % 128 / 32 * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < FILTERS / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
            for (int half = 0; half < 2; ++half)
                sums[(8 * j + 2 * (lane % 4) + e) * SUMS_PITCH + pixel + 8 * half] = acc[4 * j + 2 * half + e];
}

// This block's share of the output tile's rows (filters m0 on, pixels pixel0 on), each the sum of the cluster's blocks'
// (left by leave_sums or leave_pixel_row_sums in `sums`, their shared memory read through the cluster's window), the
// bias added, into out: a warp a row at a time, lane l its pixels l, l + 32, ... (each store of the warp 32
// consecutive pixels of one row). At batch 1 this step, with the cluster's two barriers, takes as long as the main
// loop: from the first consumer's sums left to the cluster's stored, 1.9 us of 3.6 a block at 16 filters in 4 or 8
// splits (54x54 96->16, 28x28 192->16: 2 rows a block, so two of its eight warps, each of 4 pixels a lane in turn),
// 1.6-2.5 at 32 filters in 2-8, 3.7 of 6.4 at 128 in 8 (28x28 256->256), where the main loop up to the sums left took
// 1.7-2.7 on layers of at most 8 K-tiles (H200, 2026-12-04, scripts/wgmma_probe.py --batch-one-timeline). Its rows'
// pieces dealt to every warp in batches, each lane's loads from the cluster's blocks in flight together before it
// added any (an experiment, 2026-12-05, scripts/wgmma_probe.py at e9a99e5), were no faster: 0.999x the
// call at the geometric mean over the 73 layers where it ran (faster on 33), so a warp a row stays.
__device__ __forceinline__ void add_cluster_sums(const float* sums, float* out, const float* bias, int m0, int M,
                                                 long long pixel0, long long pixels, long long PQ)
{
    constexpr int SPLITS = CLUSTER > 0 ? CLUSTER : 1, ROWS = (FILTERS + SPLITS - 1) / SPLITS;
    constexpr int WARPS = CONSUMERS / 32, PER_LANE = WIDTH / 32;
    const int lane = threadIdx.x % 32, warp = (threadIdx.x - PRODUCERS) / 32;
    const unsigned pq_count = (unsigned)PQ;
    unsigned from[SPLITS];  // the tile of sums in each block of the cluster
#pragma unroll
    for (int k = 0; k < SPLITS; ++k) from[k] = cluster::mapped(shared_address(sums), k);
    int at[PER_LANE];
    lane_pixels<WIDTH>(at, lane, M, pixel0, pixels, pq_count);
    const int first = (int)cluster::rank() * ROWS, last = min(first + ROWS, FILTERS);
    for (int row = first + warp; row < last; row += WARPS) {
        const int m = m0 + row;
        if (m >= M) break;  // (the same for the whole warp)
#pragma unroll
        for (int c = 0; c < PER_LANE; ++c) {
            if (at[c] < 0) continue;
            const unsigned offset = 4 * (row * SUMS_PITCH + lane + 32 * c);
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;  // sum_planes's order (kernels/split_sum.cuh)
            int k = 0;
#pragma unroll
            for (; k + 4 <= SPLITS; k += 4) {
                a0 += cluster::load(from[k] + offset);
                a1 += cluster::load(from[k + 1] + offset);
                a2 += cluster::load(from[k + 2] + offset);
                a3 += cluster::load(from[k + 3] + offset);
            }
#pragma unroll
            for (; k < SPLITS; ++k) a0 += cluster::load(from[k] + offset);
            const float sum = (a0 + a1) + (a2 + a3);
            out[at[c] + m * (int)pq_count] = bias != nullptr ? sum + bias[m] : sum;
        }
    }
}

// A consumer warp's rows for store_tile_staged (but with SPLIT_K): past the stages and their barriers,
// STAGED_ROWS_FLOATS a consumer warp (convkit.families.tf32x3.wgmma_operands.STAGED_ROWS_BYTES in all).
constexpr int STAGED_ROWS_FLOATS = ROWS_STAGED * (WIDTH + 8);
__device__ __forceinline__ float* staged_rows(float* smem)
{
    return smem + WS_STAGES * STAGE_WS + BARRIER_FLOATS + (threadIdx.x - PRODUCERS) / 32 * STAGED_ROWS_FLOATS;
}

// With INPUTS_FP32, a full stage's inputs split by the consumers together: the producer copied their values into the
// big plane's place, and each of the 256 consumer threads splits 4 float4s of them (tf32::split_ahead): the big parts
// in place, the small ones into the small plane (the same swizzled layout, PLANE_B_WS floats on),
// then every consumer waits for the others' on the stage's "split" barrier (`parity`: its phase, the "full" one's).
// (The producer splitting each K-tile once its copies had landed gave a stage to the consumers one K-tile later than
// its copies did, so that the stages ahead of the tensor cores were two, not three, and took the products launch
// 15-35% longer than the inputs split ahead on the 3xTF32 chapter's large layers, H200, 2026-11-29.)
__device__ __forceinline__ void split_inputs(float* inputs, unsigned long long* split, unsigned parity)
{
    constexpr int QUADS = PLANE_B_WS / 4 / CONSUMERS;
    float4* values = reinterpret_cast<float4*>(inputs);
    const int thread = threadIdx.x - PRODUCERS;
#pragma unroll
    for (int i = 0; i < QUADS; ++i) {
        float4& value = values[thread + i * CONSUMERS];
        tf32::split_ahead(value, value, values[PLANE_B_WS / 4 + thread + i * CONSUMERS]);
    }
    fence_to_async_proxy();  // both parts (generic writes) before the tensor cores read them
    arrive(split);
    wait_phase(split, parity);
}

// A consumer's `count` K-tiles of products: issue(j, sums) issues the j-th's into `sums` once its stage is full,
// add(j, sums) adds them to the tile's once they are done (and frees the stage). Accs: a thread's sums of a K-tile.
template <int Accs, typename Issue, typename Add>
__device__ __forceinline__ void multiply_k_tiles(int count, Issue&& issue, Add&& add)
{
    float partial[Accs];
    if constexpr (IN_FLIGHT == 2) {
        // Two sets of sums in turn, each named at compile time (a register array chosen at run time would live in
        // local memory, which the tensor cores cannot write as they run): a K-tile's products issued, then the
        // K-tile before's waited for and added as they run. Every wait leaves exactly the newest group running.
        float other[Accs];
        if (count > 0) {
            issue(0, partial);
            int j = 1;
            for (; j + 1 < count; j += 2) {
                issue(j, other);
                wait<1>();
                add(j - 1, partial);
                issue(j + 1, partial);
                wait<1>();
                add(j, other);
            }
            if (j < count) {
                issue(j, other);
                wait<1>();
                add(j - 1, partial);
                wait();
                add(j, other);
            } else {
                wait();
                add(j - 1, partial);
            }
        }
    } else {
        for (int j = 0; j < count; ++j) {
            issue(j, partial);
            wait();
            add(j, partial);
        }
    }
}

// A consumer thread's filters' bias (store_pixel_rows' columns 8 j + 2 (lane % 4) + e, zero past M or without one)
// into `early`, loaded before the main loop: the rows' store then waits on no load after the last products (on a
// block of a K-tile or two, the store took about 1.0 us after its last K-tile was staged; scripts/wgmma_probe.py
// --batch-one-timeline, H200, 2026-12-04). Over the bias loaded as stored, the whole call 1.045x at the geometric
// mean, faster on each of the 11 batch-1 1x1 layers whose first-use pick stores its rows (H200, 2026-12-05,
// scripts/wgmma_probe.py at e9a99e5).
__device__ __forceinline__ void load_bias_early(float (&early)[FILTERS / 4], const float* bias, int m0, int M, int lane)
{
#pragma unroll
    for (int j = 0; j < FILTERS / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int m = m0 + 8 * j + 2 * (lane % 4) + e;
            early[2 * j + e] = bias != nullptr && m < M ? bias[m] : 0.0f;
        }
}

// With PIXEL_ROWS, a consumer's 64 pixels (from pixel0) by the block's FILTERS filters (from m0) into out (NMPQ), the
// bias loaded early (load_bias_early) added: its accumulators of the products' rows lane / 4 and + 8 of its warp's 16
// (two pixels), columns 8 j + 2 (lane % 4) and + 1 (filters). Each store of a warp: 8 consecutive pixels of 4
// filters, four whole 32-byte sectors.
__device__ __forceinline__ void store_pixel_rows(const float (&acc)[FILTERS / 2], float* out, int m0, int M,
                                                 long long pixel0, long long pixels, long long PQ, int thread,
                                                 const float (&early)[FILTERS / 4])
{
    const int lane = thread % 32, warp = thread / 32;
    const unsigned pq_count = (unsigned)PQ;
    int at[2];  // its two pixels' places in out (pixel_place)
#pragma unroll
    for (int half = 0; half < 2; ++half)
        at[half] = pixel_place((unsigned)pixel0 + warp * 16 + lane / 4 + 8 * half, M, pixels, pq_count);
#pragma unroll
    for (int j = 0; j < FILTERS / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int m = m0 + 8 * j + 2 * (lane % 4) + e;
            if (m >= M) continue;
            const float add = early[2 * j + e];
#pragma unroll
            for (int half = 0; half < 2; ++half)
                if (at[half] >= 0) out[at[half] + m * (int)pq_count] = acc[4 * j + 2 * half + e] + add;
        }
}

// With PIXEL_ROWS, consumer `group` over an output tile's K-tiles: its 64 of the tile's pixels (the inputs' planes,
// rows 64 group on, in LayoutB) times all the block's filters (the weights' planes, in LayoutA), N = FILTERS, each
// K-tile's 12 products summed apart and added in FP32 as consume's; then it stores them (store_pixel_rows), or
// with ClusterSums leaves them for the cluster's blocks to add (leave_pixel_row_sums).
template <Layout LayoutA, Layout LayoutB, bool ClusterSums>
__device__ __forceinline__ void consume_pixel_rows(float* smem, unsigned long long* full, unsigned long long* empty,
                                                   int tiles, int turn0, int group, float* out, const float* bias,
                                                   int M, int m0, long long pixel0, long long pixels, long long PQ)
{
    constexpr int ACCS = FILTERS / 2;
    float acc[ACCS], early[FILTERS / 4];
#pragma unroll
    for (int i = 0; i < ACCS; ++i) acc[i] = 0.0f;
    if constexpr (!ClusterSums) load_bias_early(early, bias, m0, M, threadIdx.x % 32);
    auto add = [&](int j, const float (&sums)[ACCS]) {
        arrive(empty + (turn0 + j) % WS_STAGES);
#pragma unroll
        for (int i = 0; i < ACCS; ++i) acc[i] += sums[i];
    };
    auto issue = [&](int j, float (&sums)[ACCS]) {
        const int turn = turn0 + j, s = turn % WS_STAGES;
        wait_phase(full + s, (turn / WS_STAGES) & 1);
        float* stage = smem + s * STAGE_WS;
        fence_to_async_proxy();  // the inputs' stores, ordered before the tensor cores read them
        fence_operands();
        k_tile_products<FILTERS, LayoutB, LayoutA, WIDTH>(sums, stage + 2 * PLANE_A_WS, stage, group * 64, true);
    };
    multiply_k_tiles<ACCS>(tiles, issue, add);
    if constexpr (ClusterSums)
        leave_pixel_row_sums(acc, smem, group);  // (add_cluster_sums stores them, added over the cluster)
    else
        store_pixel_rows(acc, out, m0, M, pixel0 + group * 64, pixels, PQ, threadIdx.x % 128, early);
}

// A consumer warpgroup (`group` 0 or 1) over an output tile's K-tiles: waits for each stage, issues its 12 products
// (staged: summed apart, then added in FP32), frees the stage once they are done; then stores its rows. With 128
// filters a block it multiplies every K-tile on its 64 of them (from filter m0 + 64 group); with 64 (SPLIT_K) every
// other K-tile from its group's on all of them, the two consumers' sums then added (add_consumers_sums); with 64 and
// PINGPONG every K-tile of every other output tile on all of them (the kernels skip the other's tiles). `turn0`:
// the block's K-tiles before this output tile's (the barriers' phases count them), `round` its output tiles before
// this one. Both warp-specialised kernels' consumers, the operands' planes in `LayoutA` and `LayoutB`; with `Split`
// (the split-ahead kernel built with INPUTS_FP32) each stage's inputs split by them first (split_inputs). (A persistent
// block's tiles as one pass, each tile's store overlapping the next tile's first products, was measured a tie once the
// store had no division: 0.93-1.07x, median 0.97x, on the chapter's 110 large layers, H200, 2026-11-28.)
template <Layout LayoutA, Layout LayoutB, bool Split = false, bool ClusterSums = false>
__device__ __forceinline__ void consume(float* smem, unsigned long long* full, unsigned long long* empty, int tiles,
                                        int turn0, int round, int group, float* out, const float* bias, int M,
                                        int m0, long long pixel0, long long pixels, long long PQ)
{
    if constexpr (PIXEL_ROWS) {
        consume_pixel_rows<LayoutA, LayoutB, ClusterSums>(smem, full, empty, tiles, turn0, group, out, bias, M, m0,
                                                          pixel0, pixels, PQ);
        return;
    }
    const int first = SPLIT_K ? group : 0, step = SPLIT_K ? 2 : 1, row0 = NARROW ? 0 : group * 64;
    const int count = (tiles - first + step - 1) / step;  // this consumer's K-tiles (with SPLIT_K possibly none)
    constexpr int ACCS = WIDTH / 2;  // a consumer's 64 rows by the block's pixels, over its 128 threads
    float acc[ACCS];
#pragma unroll
    for (int i = 0; i < ACCS; ++i) acc[i] = 0.0f;
    auto add = [&](int j, const float (&sums)[ACCS]) {  // its j-th K-tile's products are done: free its stage, add
        arrive(empty + (turn0 + first + j * step) % WS_STAGES);
#pragma unroll
        for (int i = 0; i < ACCS; ++i) acc[i] += sums[i];
    };
    // Its j-th K-tile's 12 products into `sums`, summed apart from zero, issued once its stage is full.
    auto issue = [&](int j, float (&sums)[ACCS]) {
        const int turn = turn0 + first + j * step, s = turn % WS_STAGES;
        wait_phase(full + s, (turn / WS_STAGES) & 1);
        if (CONVKIT_WG_PART == 2) return;  // the staging alone
        float* stage = smem + s * STAGE_WS;
        if constexpr (Split) split_inputs(stage + 2 * PLANE_A_WS, split_barriers(empty) + s, (turn / WS_STAGES) & 1);
        if (!CONVKIT_PART_NO_FENCE) fence_to_async_proxy();  // the inputs' cp.async copies (generic writes), ordered
                                                             // before the tensor cores read them
        fence_operands();
        k_tile_products<WIDTH, LayoutA, LayoutB, FILTERS>(sums, stage, stage + 2 * PLANE_A_WS, row0, true);
    };
    multiply_k_tiles<ACCS>(count, issue, add);
    if constexpr (PINGPONG) arrive(sums_barriers(empty));  // its stages waited for: the other consumer's turn
    if constexpr (ClusterSums) {
        leave_sums(acc, smem, row0);  // (add_cluster_sums stores them, added over the cluster)
        return;
    }
    if (add_consumers_sums(acc, smem + WS_STAGES * STAGE_WS + BARRIER_FLOATS, empty, group, round) &&
        (CONVKIT_WG_PART != 10 || M < 0))  // (part 10: never, yet the sums kept: M is not known at compile time)
        if constexpr (SPLIT_K)  // (the first consumer's 64 rows; its sums' exchange holds the shared memory past the
            store_tile<WIDTH>(acc, out, bias, m0 + row0, M, pixel0, pixels, PQ, threadIdx.x % 128);  // barriers)
        else
            store_tile_staged<WIDTH>(acc, out, bias, m0 + row0, M, pixel0, pixels, PQ, threadIdx.x % 128,
                                     staged_rows(smem));
}
}  // namespace wgmma_ws

#if CONVKIT_WS_CLUSTER
#define CONVKIT_CLUSTER_DIMS __cluster_dims__(1, 1, CONVKIT_WS_CLUSTER)  // (the grid's z: the splits)
#else
#define CONVKIT_CLUSTER_DIMS
#endif
#if CONVKIT_WS_WIDTH == 128  // (the gathering kernel's producer stages 128 pixels: a column a thread)
extern "C" __global__ void __launch_bounds__(wgmma_ws::WS_THREADS, 1) CONVKIT_CLUSTER_DIMS
implicit_gemm_wgmma_ws_tf32x3(const float* __restrict__ x, const float* __restrict__ tiled,
                              const float* __restrict__ bias, float* __restrict__ out, int N, int C, int H, int W,
                              int M, int P, int Q, int pad, int stride)
{
#if defined(CONVKIT_WGMMA_BODY)
    using namespace wgmma_ws;
    extern __shared__ __align__(128) float smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + WS_STAGES * STAGE_WS);
    unsigned long long* empty = full + WS_STAGES;
    // Split over K (a block a tile, gridDim.z splits; persistent, one): this block's share of the K-tiles, its sums
    // into its split's plane of partial outputs (out, N M P Q floats a split), which sum_planes adds up with the bias,
    // or with CONVKIT_WS_CLUSTER added across the cluster into out (add_cluster_sums).
    const int all_tiles = (C * RS + BK - 1) / BK, per_split = (all_tiles + gridDim.z - 1) / gridDim.z;
    const int tile0 = blockIdx.z * per_split, tiles = max(0, min(all_tiles - tile0, per_split));
    const int m_blocks = (M + FILTERS - 1) / FILTERS;
    if (!CLUSTER) out += (long long)blockIdx.z * N * M * P * Q;
    const long long PQ = (long long)P * Q, pixels = (long long)N * PQ;
    const int tid = threadIdx.x;
    // The output tiles (128 filters by 128 pixels), the m-blocks of one pixel block together (they read the same
    // inputs): one a block, or with CONVKIT_WS_PERSISTENT a block an SM taking every gridDim.x-th tile, its producer
    // gathering the next tile's first K-tiles while its consumers store the last one's.
    const long long output_tiles = (pixels + WIDTH - 1) / WIDTH * m_blocks;
    const long long first = CONVKIT_WS_PERSISTENT ? blockIdx.x : (long long)blockIdx.x * m_blocks + blockIdx.y;
    const long long step = CONVKIT_WS_PERSISTENT ? gridDim.x : output_tiles;
#if CONVKIT_WG_TIMELINE && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // Each block's TIMELINE_STAMPS after the output (its planes, K split over them), from an even float on: 0 its start
    // (ns), 1 its start, 2 its barriers ready, 3 the producer's first K-tile staged, 4 its last (cycles, thread 0); 5
    // the first consumer's products done and its rows stored or left, 6 the cluster's sums stored, 7 its end (ns); 8
    // the kernel before it done (thread 0's wait_for_previous_kernel: launched early, a block may start while that
    // kernel runs, its time to the first K-tile then partly that kernel's), 9 the first stage full, the weights'
    // copy landed (the first consumer, cycles).
    const long long planes = (long long)(CLUSTER ? 1 : gridDim.z) * N * M * P * Q;
    unsigned long long* timeline = reinterpret_cast<unsigned long long*>(out + (planes + 1) / 2 * 2) +
                                   TIMELINE_STAMPS *
                                       (blockIdx.x + (long long)gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
    if (tid == 0) CONVKIT_STAMP(0, timeline_ns()), CONVKIT_STAMP(1, clock64());
#endif
    init_barriers(full, empty);
    if (tid == 0) CONVKIT_STAMP(2, clock64());
    let_next_kernel_start();  // (a split K's sum, launched early, waits for this kernel's planes)

    if (tid < PRODUCERS) {  // the producer: the weights by bulk copy, the inputs gathered, split and stored
        if constexpr (REGISTERS_TO_CONSUMERS) set_register_limit<false, 56>();
        // Each K-tile staged by STAGERS threads: all, or with HALVES each half every other K-tile (a thread columns
        // `thread` and `thread` + 64; without them `other` is unused, and the compiler drops it). Without HALVES,
        // `half` and `thread` are 0 and tid as written: derived from tid, they spilled the producer's 56 registers.
        constexpr int STEP = HALVES ? 2 : 1;
        const int half = HALVES ? tid / STAGERS : 0, thread = HALVES ? tid % STAGERS : tid;
        int turn0 = 0;  // the block's K-tiles staged before this output tile's
        for (long long t = first; t < output_tiles; t += step, turn0 += tiles) {
            const long long pixel0 = t / m_blocks * WIDTH;
            const int k0 = (tile0 + half) * BK;  // its first K-tile's
            ColumnGather<WIDTH, 1> one(x, thread, pixel0, pixels, PQ, Q, C, H, W, pad, stride, k0);
            ColumnGather<WIDTH, 1> other(x, thread + STAGERS, pixel0, pixels, PQ, Q, C, H, W, pad, stride, k0);
            const float* weights = tiled + (t % m_blocks * all_tiles + tile0) * (2 * PLANE_A_WS);
            for (int tile = half; tile < tiles; tile += STEP) {
                const int turn = turn0 + tile, s = turn % WS_STAGES;
                if (!CONVKIT_PART_NO_INPUTS) {  // its loads in flight while the consumers read the stage
                    one.gather();
                    if constexpr (HALVES) other.gather(), one.skip(1), other.skip(1);  // (the other half's K-tile)
                }
                float* stage = smem + s * STAGE_WS;
                if (turn == half) {
                    wait_for_previous_kernel();  // launched early: the weights' split, done and written
                    if (tid == 0) CONVKIT_STAMP(8, clock64());
                }
                if constexpr (!WEIGHTS_IN_BLOCK)  // (else the consumers split them: split_block_weights)
                    acquire_and_copy_weights(stage, weights, tile, turn, s, full, empty, thread == 0);
                if (!CONVKIT_PART_NO_INPUTS) {
                    one.store(stage + 2 * PLANE_A_WS);
                    if constexpr (HALVES) other.store(stage + 2 * PLANE_A_WS);
                }
                fence_to_async_proxy();  // the stores, visible to the tensor cores' reads
                arrive(full + s);
                if (tid == 0 && turn == 0) CONVKIT_STAMP(3, clock64());
            }
        }
        if (tid == 0) CONVKIT_STAMP(4, clock64());
        if constexpr (CLUSTER > 0) {  // the cluster's two barriers (the consumers' sums left, then read)
            cluster::sync();
            cluster::sync();
        }
        return;
    }
    if constexpr (REGISTERS_TO_CONSUMERS) set_register_limit<true, 224>();
    if constexpr (WEIGHTS_IN_BLOCK)  // (`tiled`: w as given; a block a tile, `first`)
        split_block_weights(smem, tiled, M, C * RS, (int)(first % m_blocks) * FILTERS, tile0, tiles, full);
#if CONVKIT_WG_TIMELINE && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (tid == PRODUCERS && tiles > 0 && first < output_tiles) {  // (its first K-tile: turn 0, stage 0, always)
        wait_phase(full, 0);
        CONVKIT_STAMP(9, clock64());
    }
#endif
    int turn0 = 0, round = 0;
    for (long long t = first; t < output_tiles; t += step, turn0 += tiles, ++round) {
        if (!takes_tile(empty, round, tid / 128 - 1)) continue;  // (ping-pong: the other consumer's tile)
        consume<Layout::INTERLEAVED, Layout::INTERLEAVED, false, (CLUSTER > 0)>(
            smem, full, empty, tiles, turn0, round, tid / 128 - 1, out, bias, M, (int)(t % m_blocks) * FILTERS,
            t / m_blocks * WIDTH, pixels, PQ);
    }
    if (tid == PRODUCERS) CONVKIT_STAMP(5, clock64());
    if constexpr (CLUSTER > 0) {  // a block a tile: `first`
        cluster::sync();
        add_cluster_sums(smem, out, bias, (int)(first % m_blocks) * FILTERS, M, first / m_blocks * WIDTH, pixels, PQ);
        cluster::sync();
    }
    if (tid == PRODUCERS) CONVKIT_STAMP(6, clock64()), CONVKIT_STAMP(7, timeline_ns());
#endif
}
#endif  // CONVKIT_WS_WIDTH == 128

// ---------------------------------------------------------------------------------------------
// The warp-specialised kernel on inputs split ahead, implicit_gemm_wgmma_ws_nhwc_tf32x3: its producer neither gathers
// nor splits. split_ahead_operands_tf32x3 writes the input's big and small planes once per call, channels last
// ([N][H][W][CP], CP = C rounded up to 32, zeros past C); a K-tile is then 32 channels at one filter tap (K-tile t:
// channel block t / RS, tap t % RS; the weights split to match in the same launch), and a pixel's row of it is
// 128 contiguous bytes of each plane, which the producer copies by 16-byte cp.async (zeros where the tap falls outside
// the image) into the stage's input planes, laid out in the 128-byte swizzle; the copies arrive on the stage's "full"
// barrier as they land. So a K-tile costs a producer thread some hundred instructions, where gathering and splitting
// cost some 600, which set the pace of implicit_gemm_wgmma_ws_tf32x3 (its staging alone took 2.4x its products alone
// on the H200; on a 1x1 filter its gathering is now a load and an add a value, ColumnGather's one-tap path). The
// stages must start 1,024-byte aligned (the swizzle is of address bits): the kernel traps if not.
// With CONVKIT_WS_TAP_PAIRS (at most 16 channels) the rows are 16 channels wide and a K-tile two taps of them.
// With CONVKIT_WS_INPUTS_FP32 the input is one plane in FP32 (half the bytes to write ahead and to stage): the
// producer copies a pixel's 128 bytes into the big plane's place, and the consumers split them there once the stage
// is full, the small parts into the small plane's place (split_inputs).
namespace wgmma_ws {
constexpr int CHANNELS = wgmma_operands::CHANNELS;  // a K-tile's channels
static_assert(CHANNELS == BK, "a K-tile of the split-ahead kernel is 32 channels at one tap");
// With CONVKIT_WS_TAP_PAIRS, for a layer of at most 16 channels (whose K-tiles of 32 channels at one tap would be at
// least half zeros, in the products and in the staging alike): the input's rows padded to 16 channels, and K-tile t
// two taps of them, 2 t (its k 0-15) and 2 t + 1 (16-31; none past the last tap); the weights split to match.
constexpr bool TAP_PAIRS = CONVKIT_WS_TAP_PAIRS;
using wgmma_operands::PAIRED_CHANNELS;

// The channels of a pixel's row in the input's planes, and the K-tiles, of a layer of C channels.
__host__ __device__ constexpr int row_channels(int C)
{
    return TAP_PAIRS ? PAIRED_CHANNELS : wgmma_operands::padded_channels(C);
}
__host__ __device__ constexpr int nhwc_tiles(int C)
{
    return TAP_PAIRS ? (RS + 1) / 2 : row_channels(C) / CHANNELS * RS;
}

// An arrival on `bar` once this thread's cp.async copies so far have landed (counted among its expected arrivals).
__device__ __forceinline__ void arrive_on_copies(unsigned long long* bar)
{
#if defined(CONVKIT_EMULATED_WGMMA)
    emu::mbarrier_arrive(bar, 0);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(shared_address(bar)) : "memory");
#endif
}
}  // namespace wgmma_ws

namespace wgmma_ws {
// Independent GEMMs of one shape, run by one launch (Winograd's transformed points): GEMM b's input planes, tiled
// weights and output lie b x the step on from the first's. One GEMM: count 1, steps 0.
struct Batch {
    int count;
    long long planes_step, tiled_step, out_step;
};

// The split-ahead kernel's body over `batch` GEMMs of one shape: the output tiles of every GEMM of the batch, one a
// block (grid: pixel blocks, m-blocks, GEMMs) or with CONVKIT_WS_PERSISTENT every gridDim.x-th of them a block.
__device__ __forceinline__ void split_ahead_gemm(const float* __restrict__ planes, const float* __restrict__ tiled,
                                                 const float* __restrict__ bias, float* __restrict__ out, int N,
                                                 int C, int H, int W, int M, int P, int Q, int pad, int stride,
                                                 Batch batch)
{
    extern __shared__ __align__(128) float smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + WS_STAGES * STAGE_WS);
    unsigned long long* empty = full + WS_STAGES;
    if (HALVES) __trap();  // (its producer copies each K-tile whole: its barriers count on that; the launch refuses it)
    const int CP = row_channels(C), tiles = nhwc_tiles(C);
    if (shared_address(smem) % 1024 != 0) __trap();  // a swizzled plane read as another's: say so, loudly
    const long long PQ = (long long)P * Q, pixels = (long long)N * PQ;
    const int tid = threadIdx.x, m_blocks = (M + FILTERS - 1) / FILTERS;
    // The output tiles (FILTERS filters by 128 pixels), the m-blocks of one pixel block together (they read the same
    // inputs), GEMM by GEMM of the batch: one a block, or with CONVKIT_WS_PERSISTENT a block an SM taking every
    // gridDim.x-th tile, its producer staging the next tile's first K-tiles while its consumers store the last one's.
    const long long gemm_tiles = (pixels + WIDTH - 1) / WIDTH * m_blocks, output_tiles = gemm_tiles * batch.count;
    const long long first = CONVKIT_WS_PERSISTENT
                                ? blockIdx.x
                                : ((long long)blockIdx.z * gridDim.x + blockIdx.x) * m_blocks + blockIdx.y;
    const long long step = CONVKIT_WS_PERSISTENT ? gridDim.x : output_tiles;
    // Output tile t as GEMM `gemm` of the batch and the tile `within` it.
    auto locate = [&](long long t, long long& within) {
        const long long gemm = batch.count > 1 ? t / gemm_tiles : 0;
        within = t - gemm * gemm_tiles;
        return gemm;
    };
    init_barriers(full, empty);

    if (tid < PRODUCERS) {  // the producer: the weights by bulk copy, the pixels' rows by cp.async
        if constexpr (IN_FLIGHT == 2) set_register_limit<false, 64>();
        // Eight threads to a pixel's row, one 16-byte chunk each (a warp's copy reads four whole 128-byte lines and,
        // the inputs' planes swizzled, writes 512 bytes without a bank conflict); a thread's pixels PIXEL_STEP apart.
        constexpr int CHUNKS = CHANNELS / 4, PIXEL_STEP = PRODUCERS / CHUNKS, PIXELS = WIDTH / PIXEL_STEP;
        const int chunk = tid % CHUNKS;
        const int plane = N * H * W * CP;  // both planes under 2^31 floats (the launch checks)
        int turn = 0;                      // K-tiles staged so far
        for (long long t = first; t < output_tiles; t += step) {
            long long within;
            const long long gemm = locate(t, within), pixel0 = within / m_blocks * WIDTH;
            const float* gemm_planes = planes + gemm * batch.planes_step;
            int ih0[PIXELS], iw0[PIXELS];  // each pixel's window corner (ih0 far outside where it is past the end)
            int row0[PIXELS];              // its image's start, at this thread's chunk
            // The first pixel's image, row and column divided out (32-bit: the pixels lie under 2^31), the others
            // stepped on from it: 64-bit divisions per pixel made this some 700 instructions a warp a tile, between
            // one tile's K-tiles and the next's, which a GEMM of few K-tiles waited for (Winograd's products).
            unsigned pixel = (unsigned)pixel0 + tid / CHUNKS;
            int n = (int)(pixel / (unsigned)PQ);
            const int pq = (int)(pixel - n * (unsigned)PQ);
            int oh = pq / Q, ow = pq - oh * Q;
#pragma unroll
            for (int i = 0; i < PIXELS; ++i) {
                if (i > 0) {
                    pixel += PIXEL_STEP, ow += PIXEL_STEP;
                    while (ow >= Q) {
                        ow -= Q;
                        if (++oh == P) oh = 0, ++n;
                    }
                }
                const bool ok = pixel < (unsigned long long)pixels;
                ih0[i] = ok ? oh * stride - pad : -(1 << 30);
                iw0[i] = ow * stride - pad;
                row0[i] = (ok ? n * H * W * CP : 0) + (TAP_PAIRS ? chunk % 4 : chunk) * 4;
            }
            const float* weights = tiled + gemm * batch.tiled_step + within % m_blocks * tiles * (2 * PLANE_A_WS);
            int r = 0, s = 0, c0 = 0;  // K-tile `tile`'s tap and first channel (TAP_PAIRS: this thread's tap of two)
            if (TAP_PAIRS && chunk >= 4 && ++s == S) s = 0, r = 1;  // (the second tap of each pair: its k 16-31)
            for (int tile = 0; tile < tiles; ++tile, ++turn) {
                const int st = turn % WS_STAGES;
                float* stage = smem + st * STAGE_WS;
                if (turn == 0) wait_for_previous_kernel();  // launched early: the operands' split, done and written
                acquire_and_copy_weights(stage, weights, tile, turn, st, full, empty);
                if (!CONVKIT_PART_NO_INPUTS) {
#pragma unroll
                    for (int i = 0; i < PIXELS; ++i) {
                        const int ih = ih0[i] + r, iw = iw0[i] + s, p = tid / CHUNKS + i * PIXEL_STEP;
                        const bool inside = (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W &&
                                            (!TAP_PAIRS || r < R);
                        const float* from = gemm_planes + row0[i] + (inside ? (ih * W + iw) * CP + c0 : 0);
                        float* to = stage + 2 * PLANE_A_WS + swizzled_line(p, chunk);
                        copy16<true>(to, from, inside);  // with INPUTS_FP32 the FP32 values (split by the consumers)
                        if (!INPUTS_FP32) copy16<true>(to + PLANE_B_WS, from + plane, inside);
                    }
                }
                arrive_on_copies(full + st);
                if (TAP_PAIRS) {  // two taps on (past the last: r >= R, zeros)
                    for (int step = 0; step < 2; ++step)
                        if (++s == S) s = 0, ++r;
                } else if (++s == S) {
                    s = 0;
                    if (++r == R) r = 0, c0 += CHANNELS;
                }
            }
        }
        copies_commit();  // its copies as one group (they belong to none yet), landed before the thread leaves
        copies_wait();
        return;
    }
    if constexpr (IN_FLIGHT == 2) set_register_limit<true, 216>();
    int turn0 = 0, round = 0;
    for (long long t = first; t < output_tiles; t += step, turn0 += tiles, ++round) {
        if (!takes_tile(empty, round, tid / 128 - 1)) continue;  // (ping-pong: the other consumer's tile)
        long long within;
        const long long gemm = locate(t, within);
        consume<CONVKIT_WG_PART == 8 ? Layout::SWIZZLED : Layout::INTERLEAVED,
                CONVKIT_WG_PART == 7 ? Layout::INTERLEAVED : Layout::SWIZZLED, INPUTS_FP32>(
            smem, full, empty, tiles, turn0, round, tid / 128 - 1, out + gemm * batch.out_step, bias, M,
            (int)(within % m_blocks) * FILTERS, within / m_blocks * WIDTH, pixels, PQ);
    }
}
}  // namespace wgmma_ws

extern "C" __global__ void __launch_bounds__(wgmma_ws::WS_THREADS, 1)
implicit_gemm_wgmma_ws_nhwc_tf32x3(const float* __restrict__ planes, const float* __restrict__ tiled,
                                   const float* __restrict__ bias, float* __restrict__ out, int N, int C, int H,
                                   int W, int M, int P, int Q, int pad, int stride)
{
#if defined(CONVKIT_WGMMA_BODY)
    wgmma_ws::split_ahead_gemm(planes, tiled, bias, out, N, C, H, W, M, P, Q, pad, stride, {1, 0, 0, 0});
#endif
}

// Winograd's products on the split-ahead kernel (convkit.families.tf32x3.wgmma.WgmmaWinogradLaunch): one GEMM a
// transformed point, Mo[xi] (M x t_pad) = V[xi] (M x C) . U[xi] (C x t_pad), each a 1x1 convolution of one image
// of 1 x t_pad pixels (the module built with CONVKIT_R=1, CONVKIT_S=1). winograd_transforms writes U[xi] as this
// kernel's input planes (channels last, split: [2][t_pad][CP]; with CONVKIT_WS_INPUTS_FP32 one FP32 plane, [t_pad][CP],
// which the consumers split in shared memory: half the bytes written by the transform and read here) and V[xi] as its
// tiled weights; the products go to Mo[xi][m][t] as winograd_output reads them. No bias: the output transform adds
// it. Built at 128 filters a block alone: at 64 it spilled (40 bytes stored, 116 loaded, ptxas) and the products were
// slower than at 128 on every large layer of 64 filters or fewer (0.93-0.99x, H200, 2026-11-28).
#if CONVKIT_WS_FILTERS == 128 && !CONVKIT_WS_TAP_PAIRS
extern "C" __global__ void __launch_bounds__(wgmma_ws::WS_THREADS, 1)
winograd_products_wgmma_tf32x3(const float* __restrict__ u, const float* __restrict__ v, float* __restrict__ mo,
                               int M, int C, int t_pad, int points)
{
#if defined(CONVKIT_WGMMA_BODY)
    using namespace wgmma_ws;
    static_assert(FILTERS == wgmma_operands::WINOGRAD_FILTERS, "winograd.cu tiles the filters in blocks of 128");
    const long long CP = wgmma_operands::padded_channels(C);
    const long long v_step = (long long)(M + FILTERS - 1) / FILTERS * (CP / CHANNELS) * (2 * PLANE_A_WS);
    split_ahead_gemm(u, v, nullptr, mo, 1, C, 1, t_pad, M, 1, t_pad, 0, 1,
                     {points, (INPUTS_FP32 ? 1 : 2) * t_pad * CP, v_step, (long long)M * t_pad});
#endif
}
#endif

// The input's big and small planes for implicit_gemm_wgmma_ws_nhwc_tf32x3, channels last: [N][H W][CP] each (the
// small plane `plane` floats after the big one; tf32::split_ahead), zeros past C. A block of 32 x 8 threads turns a
// tile of 32 channels (from c0) by 32 pixels (from p0) of image n through shared memory, so that it reads x and writes
// the planes in whole lines. With CONVKIT_WS_INPUTS_FP32, one plane in FP32, which the split-ahead kernel built so
// splits as it stages it.
namespace wgmma_ws {
__device__ __forceinline__ void split_input_tile(const float* __restrict__ x, float* __restrict__ planes, int N, int C,
                                                 int HW, int n, int c0, int p0)
{
    __shared__ float tile[32][33];
    const int CP = row_channels(C);
    const long long plane = (long long)N * HW * CP;
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int c = c0 + i, p = p0 + threadIdx.x;
        tile[i][threadIdx.x] = c < C && p < HW ? x[((long long)n * C + c) * HW + p] : 0.0f;
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int p = p0 + i;
        if (p >= HW || (TAP_PAIRS && c0 + (int)threadIdx.x >= CP)) continue;  // (rows of 16 channels)
        const long long at = ((long long)n * HW + p) * CP + c0 + threadIdx.x;
        const float value = tile[threadIdx.x][i];
        if (CONVKIT_WS_INPUTS_FP32) {
            planes[at] = value;  // split as staged (split_inputs)
        } else {
            tf32::split_ahead(value, planes[at], planes[plane + at]);
        }
    }
}

// The weights split ahead for either warp-specialised kernel, once per call, each K-tile of each block of FILTERS
// filters as it lies in a stage: [block][tile][plane][k-group][row][4], zero past M and K. One thread a k-group line,
// the lines from `first`, every `step`-th, a K-tile's row of 8 lines to 8 consecutive threads: a warp reads 4 rows'
// 128 contiguous bytes of w each (by one 16-byte load a thread where its 4 values lie so in w) and writes whole
// 32-byte sectors (4 rows' lines of a k-group lie together). H200, the split alone (2026-12-04, the study's timing, the
// 3xTF32 chapter's batch-1 1x1 layers): 7.0 us on 4 MiB of weights, 4.9 on 1 MiB, where 32 consecutive rows a warp
// and 4 loads a thread took 8.9 and 5.6 (scripts/wgmma_probe.py --batch-one; an empty launch: 3.3). `Source(m, tile,
// k)` is the index in w of row m's k-th value of K-tile `tile`, or -1 for a zero.
template <typename Source>
__device__ __forceinline__ void split_weights_tiled(const float* __restrict__ w, float* __restrict__ tiled, int M,
                                                    int tiles, Source source, long long first, long long step)
{
    const long long lines = (long long)((M + FILTERS - 1) / FILTERS) * tiles * KGROUPS * FILTERS;  // of 4 floats
    for (long long i = first; i < lines; i += step) {
        const int kgroup = (int)(i % KGROUPS), row = (int)(i / KGROUPS % FILTERS);
        const long long tile_of = i / (FILTERS * KGROUPS);  // block * tiles + tile
        const int tile = (int)(tile_of % tiles), m = (int)(tile_of / tiles) * FILTERS + row;
        float4 big, small;
        split_weight_line(w, M, m, tile, kgroup, source, big, small);
        float* chunk = tiled + wgmma_operands::tiled_line(tile_of, kgroup, row, FILTERS);
        *reinterpret_cast<float4*>(chunk) = big;
        *reinterpret_cast<float4*>(chunk + PLANE_A_WS) = small;
    }
}
}  // namespace wgmma_ws

// For implicit_gemm_wgmma_ws_tf32x3: its K-tiles of w's rows (RowsOfK).
extern "C" __global__ void split_weights_tiled_tf32x3(const float* __restrict__ w, float* __restrict__ tiled, int M,
                                                      int K)
{
    using namespace wgmma_ws;
    let_next_kernel_start();  // the wgmma kernel after it, launched early, waits for its writes before reading them
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x, step = (long long)gridDim.x * blockDim.x;
    wgmma_ws::split_weights_tiled(w, tiled, M, (K + BK - 1) / BK, wgmma_ws::RowsOfK{K}, first, step);
}

// The split-ahead kernel's operands, split once per call by one launch (a launch fewer ahead of the kernel; 32 x 8
// threads a block): its first blocks the input's planes, a tile each (split_input_tile, blocks in x of pixel tiles,
// then channel tiles, then images), the rest the weights tiled to match (split_weights_tiled: K-tile t holds channels
// 32 (t / RS) .. + 31 at tap t % RS; with TAP_PAIRS channels 0 .. 15 at taps 2 t and 2 t + 1), a line a thread.
extern "C" __global__ void split_ahead_operands_tf32x3(const float* __restrict__ x, float* __restrict__ planes, int N,
                                                       int C, int HW, const float* __restrict__ w,
                                                       float* __restrict__ tiled, int M)
{
    using namespace wgmma_ws;
    let_next_kernel_start();  // the split-ahead kernel after it, launched early, waits for its writes before reading
    const unsigned pixel_tiles = (HW + 31) / 32, tiles_of_image = pixel_tiles * ((C + 31) / 32);
    const unsigned input_blocks = tiles_of_image * N;  // (the launch keeps the grid under 2^31)
    if (blockIdx.x < input_blocks) {
        const unsigned n = blockIdx.x / tiles_of_image, in_image = blockIdx.x - n * tiles_of_image;
        split_input_tile(x, planes, N, C, HW, (int)n, (int)(in_image / pixel_tiles) * 32,
                         (int)(in_image % pixel_tiles) * 32);
        return;
    }
    const int threads = blockDim.x * blockDim.y, thread = threadIdx.y * blockDim.x + threadIdx.x;
    const long long first = (long long)(blockIdx.x - input_blocks) * threads + thread;
    const long long step = (long long)(gridDim.x - input_blocks) * threads;
    split_weights_tiled(w, tiled, M, nhwc_tiles(C), [=](int m, int tile, int k) -> long long {
        const int c = TAP_PAIRS ? k % PAIRED_CHANNELS : tile / RS * CHANNELS + k;
        const int tap = TAP_PAIRS ? 2 * tile + k / PAIRED_CHANNELS : tile % RS;
        return c < C && tap < RS ? ((long long)m * C + c) * RS + tap : -1;
    }, first, step);
}

// ---------------------------------------------------------------------------------------------
// The products' ceiling, wgmma_products_ceiling (scripts/wgmma_probe.py --ceiling; records nothing): each warpgroup
// of a block runs `iters` K-tiles of the kernels' 12 products on one stage of shared memory, each summed
// apart and added in FP32 as the kernels do, with nothing else to wait for: no staging, no barrier. What the tensor
// cores give the kernels' main loop at best, per setting: CONVKIT_WG_N (at 256 the sums left to the tensor cores,
// as the kernel does), CONVKIT_WS_IN_FLIGHT (1: each K-tile waited
// for before the next is issued; 2: the next issued first) and CONVKIT_CEILING_SWIZZLE (0: the kernels' layout, no
// swizzle, a k-step's two k-groups ROWS x 16 bytes apart; 1: the 128-byte swizzle CUTLASS's Hopper kernels use, a
// row's 32 floats in one 128-byte line, 16-byte chunks XORed with the row's index in its 8-row atom; 2: B alone
// swizzled, as the split-ahead kernel reads its operands) and
// CONVKIT_CEILING_WARPGROUPS (2, or 3: a third multiplying the first's rows again, one K-tile in flight).
#ifndef CONVKIT_CEILING_SWIZZLE
#define CONVKIT_CEILING_SWIZZLE 0
#endif
#ifndef CONVKIT_CEILING_WARPGROUPS
#define CONVKIT_CEILING_WARPGROUPS 2
#endif
namespace wgmma_ceiling {
using namespace wgmma_tf32x3;

// `v` computed here, before any later asm (an empty one): the sums of a K-tile, added to the block's before the next
// products are issued. Left to sink below them, the add would copy its operand while the tensor cores write it, and
// ptxas would serialise every wgmma of the kernel.
__device__ __forceinline__ void pin(float& v)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("" : "+f"(v));
#endif
}

}  // namespace wgmma_ceiling

extern "C" __global__ void __launch_bounds__(128 * CONVKIT_CEILING_WARPGROUPS, 1) wgmma_products_ceiling(float* __restrict__ out, int iters)
{
#if defined(CONVKIT_WGMMA_BODY)
    using namespace wgmma_ceiling;
    extern __shared__ __align__(128) float smem[];  // at the window's start: 1,024-byte aligned, as the swizzle needs
    // operands as the kernels meet them, not zeros (the tensor cores' power, and so their clock, depends on the bits
    // they toggle): TF32 values in [1, 2) of hashed mantissas, signs mixed
    for (int i = threadIdx.x; i < STAGE; i += blockDim.x) {
        const unsigned hash = (unsigned)(i + 1) * 2654435761u ^ (unsigned)(blockIdx.x + 1) * 40503u;
        smem[i] = __uint_as_float(0x3f800000u | (hash >> 9 & 0x7fe000u) | (hash << 31));
    }
    fence_to_async_proxy();
    __syncthreads();
    const int row0 = (threadIdx.x / 128) % 2 * 64;  // a third warpgroup multiplies the first's rows again
    float acc[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
    auto products = [&](float (&into)[ACC], bool fresh = true) {
        fence_operands();
        constexpr Layout a = CONVKIT_CEILING_SWIZZLE == 1 ? Layout::SWIZZLED : Layout::INTERLEAVED;
        constexpr Layout b = CONVKIT_CEILING_SWIZZLE ? Layout::SWIZZLED : Layout::INTERLEAVED;
        k_tile_products<BN, a, b>(into, smem, smem + 2 * PLANE_A, row0, fresh);
    };
    auto add = [&](const float (&from)[ACC]) {
#pragma unroll
        for (int i = 0; i < ACC; ++i) pin(acc[i] += from[i]);
    };
    if constexpr (BN == 256) {  // as the kernel at 256 pixels: the sums left to the tensor cores
        for (int it = 0; it < iters; ++it) {
            products(acc, false);
            wait();
        }
    } else if constexpr (CONVKIT_WS_IN_FLIGHT == 2) {
        float sums[ACC], other[ACC];
        products(sums);
        int it = 1;
        for (; it + 1 < iters; it += 2) {
            products(other);
            wait<1>();
            add(sums);
            products(sums);
            wait<1>();
            add(other);
        }
        if (it < iters) {
            products(other);
            wait<1>();
            add(sums);
            wait();
            add(other);
        } else {
            wait();
            add(sums);
        }
    } else {
        float sums[ACC];
        for (int it = 0; it < iters; ++it) {
            products(sums);
            wait();
            add(sums);
        }
    }
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < ACC; ++i) total += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = total;
#endif
}
