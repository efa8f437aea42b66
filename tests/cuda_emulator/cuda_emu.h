// A CPU stand-in for the CUDA features the chang2022, lu2020 and implicit GEMM kernels use, so that their index
// arithmetic, staging, channel-split protocol and tensor-core fragments run (and are checked) on a machine with no
// GPU.
//
// - A block's threads are fibers (ucontext): the scheduler runs each in turn up to its next
//   __syncthreads, then the next round; a thread that ends while others wait at a barrier is an error
//   (what compute-sanitizer's synccheck reports).
// - Blocks run one after another, so a static stands for a __shared__ variable, and a split that waits
//   for another block's zeros only ever waits for a block that has already run (the kernels' own rule). A
//   thread-block cluster's blocks (CONVKIT_EMULATED_CLUSTER_Z along z) run together, each with its own dynamic
//   shared memory, reading each other's through the cluster's window; its barrier, like a named barrier
//   (bar.sync id, count), yields until every thread it waits for has arrived.
// - __CUDA_ARCH__ is undefined: the kernels take their synchronous-copy paths (Turing's), not cp.async.
// - mma.sync.m16n8k8 on TF32 is a warp collective (CONVKIT_EMULATED_MMA, which a kernel calls in place of its
//   inline PTX): each lane posts its fragments, then computes its part of the product from all 32 lanes'; so is
//   ldmatrix.x4 (CONVKIT_EMULATED_LDMATRIX_X4): each lane posts its row's address, then reads its words.
// - wgmma.mma_async m64nNk8 on TF32 (CONVKIT_EMULATED_WGMMA) reads both operands from shared memory through
//   their descriptors, so each thread computes its own part of the product, as soon as it is issued; cp.async
//   and cp.async.bulk copy at once, and the fences, commits and waits have nothing to order. An mbarrier wait
//   yields to the block's other threads until its phase completes; so does a lane at __syncwarp until its warp's
//   other lanes arrive.
// - CONVKIT_EMULATED_SLOW_WARPS="first,last" (the environment, read at each launch): those warps' waits (an
//   mbarrier's, a warp's meeting, a named barrier's) are looked at only every 64th round, so that the block's other
//   warps run ahead of them as a GPU's warpgroups may; a protocol that holds only while every thread keeps pace (a
//   parity wait passed by two phases) then fails. A __syncthreads is never delayed: all arrive in one round.
// - Dynamic shared memory is poisoned with NaN for every block and followed by a guard that must stay
//   untouched (a launch that uses more than it was given fails).
#pragma once
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

struct alignas(16) float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct alignas(8) float2 {
    float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))  // GNU: allowed among the decl-specifiers
#define __shared__ static  // blocks run one at a time: a static is the running block's
using std::max;
using std::min;

// Blocks run in order, so the fibers see each other's writes: fences are no-ops, atomics plain.
inline void __threadfence() {}
inline float atomicAdd(float* p, float v) { const float old = *p; *p = old + v; return old; }
inline int atomicAdd(int* p, int v) { const int old = *p; *p = old + v; return old; }
inline int atomicExch(int* p, int v) { const int old = *p; *p = v; return old; }

// A spin-wait that sleeps this often waits for something no earlier block did: it would hang.
inline void __nanosleep(unsigned)
{
    static long sleeps = 0;
    if (++sleeps > 1000000) {
        std::fprintf(stderr, "a thread waits for a write no earlier block made\n");
        std::exit(5);
    }
}

namespace emu {
struct Fiber {
    ucontext_t context;
    std::vector<char> stack = std::vector<char>(1 << 18);
    bool done = false;
    bool yielded = false;  // stopped in an mbarrier wait, not at __syncthreads
    dim3 index;
};
inline ucontext_t scheduler;
inline std::vector<Fiber>* fibers = nullptr;
inline int current = 0;
inline std::function<void()> body;
inline float* smem_base = nullptr;  // the running block's dynamic shared memory, and its size
inline size_t smem_bytes = 0;

inline void run_current()
{
    body();
    (*fibers)[current].done = true;  // then uc_link returns to the scheduler
}

// Thread-block clusters (the gathering wgmma kernel's K split, built with __cluster_dims__(1, 1, z)): the driver
// builds with -DCONVKIT_EMULATED_CLUSTER_Z=z, and a cluster's z blocks then run together, their threads' fibers taking
// turns in one round, each block with its own shared memory (cluster_smem, by rank: blockIdx.z % z).
#ifndef CONVKIT_EMULATED_CLUSTER_Z
#define CONVKIT_EMULATED_CLUSTER_Z 1
#endif
constexpr unsigned CLUSTER_Z = CONVKIT_EMULATED_CLUSTER_Z;
inline int block_threads = 0;
inline std::vector<float*> cluster_smem;

// CONVKIT_EMULATED_SLOW_WARPS's warps, [first, last] of each block (none: first > last), and their pace in rounds.
// A value it cannot read stops the launch: a stress test that silently ran unstressed would pass for nothing.
struct SlowWarps {
    int first = 1, last = 0;
    static constexpr long EVERY = 64;
};
inline SlowWarps slow_warps()
{
    SlowWarps slow;
    const char* range = std::getenv("CONVKIT_EMULATED_SLOW_WARPS");
    if (range && (std::sscanf(range, "%d,%d", &slow.first, &slow.last) != 2 || slow.first > slow.last)) {
        std::fprintf(stderr, "CONVKIT_EMULATED_SLOW_WARPS=\"%s\": give \"first,last\" (warps)\n", range);
        std::exit(3);
    }
    return slow;
}

// Launch `kernel` (the call, capturing its arguments) over `grid`, with `shared_bytes` of dynamic
// shared memory pointed to by `dynamic_smem` (the kernel source's extern array, made a pointer).
inline void launch(dim3 grid, dim3 block, size_t shared_bytes, float*& dynamic_smem, std::function<void()> kernel)
{
    if (grid.z % CLUSTER_Z) {
        std::fprintf(stderr, "a grid of %u blocks along z in clusters of %u\n", grid.z, CLUSTER_Z);
        std::exit(3);
    }
    gridDim = grid;
    blockDim = block;
    const int threads = block_threads = block.x * block.y * block.z;
    const size_t words = (shared_bytes + 3) / 4, guard = 1024;
    std::vector<std::vector<float4>> smem(CLUSTER_Z, std::vector<float4>((words + guard + 3) / 4));
    cluster_smem.assign(CLUSTER_Z, nullptr);
    for (unsigned c = 0; c < CLUSTER_Z; ++c) cluster_smem[c] = &smem[c][0].x;
    std::vector<Fiber> cluster_fibers(CLUSTER_Z * threads);  // block c's thread t: fiber c threads + t
    fibers = &cluster_fibers;
    body = std::move(kernel);
    smem_bytes = shared_bytes;
    const SlowWarps slow = slow_warps();
    for (unsigned bz = 0; bz < grid.z; bz += CLUSTER_Z)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                for (unsigned c = 0; c < CLUSTER_Z; ++c) std::fill_n(cluster_smem[c], smem[c].size() * 4, NAN);
                for (int f = 0; f < int(cluster_fibers.size()); ++f) {
                    Fiber& fiber = cluster_fibers[f];
                    const int t = f % threads;
                    fiber.done = false;
                    fiber.index = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
                    getcontext(&fiber.context);
                    fiber.context.uc_stack.ss_sp = fiber.stack.data();
                    fiber.context.uc_stack.ss_size = fiber.stack.size();
                    fiber.context.uc_link = &scheduler;
                    makecontext(&fiber.context, run_current, 0);
                }
                // A round: every live thread runs to its next barrier (or mbarrier wait) or its end; a slow warp
                // waiting is looked at every SlowWarps::EVERY rounds.
                for (long round = 0;; ++round) {
                    std::vector<int> waiting(CLUSTER_Z), yielded(CLUSTER_Z), ended(CLUSTER_Z);
                    for (int f = 0; f < int(cluster_fibers.size()); ++f) {
                        if (cluster_fibers[f].done) continue;
                        const int c = f / threads, warp = f % threads / 32;
                        if (cluster_fibers[f].yielded && slow.first <= warp && warp <= slow.last &&
                            round % SlowWarps::EVERY) {
                            ++yielded[c];
                            continue;
                        }
                        current = f;
                        threadIdx = cluster_fibers[f].index;
                        blockIdx = {bx, by, bz + c};
                        dynamic_smem = smem_base = cluster_smem[c];
                        cluster_fibers[f].yielded = false;
                        swapcontext(&scheduler, &cluster_fibers[f].context);
                        cluster_fibers[f].done ? ++ended[c] : cluster_fibers[f].yielded ? ++yielded[c] : ++waiting[c];
                    }
                    int live = 0;
                    for (unsigned c = 0; c < CLUSTER_Z; ++c) {
                        live += waiting[c] + yielded[c];
                        if (ended[c] && waiting[c]) {
                            std::fprintf(stderr, "block (%u,%u,%u): %d threads wait at a barrier that %d left\n", bx,
                                         by, bz + c, waiting[c], ended[c]);
                            std::exit(3);
                        }
                    }
                    if (live == 0) break;
                }
                for (unsigned c = 0; c < CLUSTER_Z; ++c)
                    for (size_t i = words; i < words + guard; ++i)
                        if (!std::isnan(cluster_smem[c][i])) {
                            std::fprintf(stderr, "block (%u,%u,%u) wrote shared memory past its %zu bytes\n", bx, by,
                                         bz + c, shared_bytes);
                            std::exit(4);
                        }
            }
}
}  // namespace emu

inline void __syncthreads() { swapcontext(&(*emu::fibers)[emu::current].context, &emu::scheduler); }

// mbarriers (the warp-specialised wgmma kernel): each barrier's expected arrivals, those still pending in its phase,
// the bytes its phase still waits for, and its completed phases. A wait yields to the other threads until the phase
// of its parity is complete; cp.async.bulk copies at once and counts its bytes. A wait that never ends is a hang.
namespace emu {
struct Mbarrier {
    int count = 0, pending = 0;
    long long bytes = 0;
    unsigned phase = 0;
};
inline std::map<const void*, Mbarrier> mbarriers;

inline void mbarrier_init(const void* bar, int count) { mbarriers[bar] = {count, count, 0, 0}; }

inline void mbarrier_settle(Mbarrier& b)
{
    if (b.pending == 0 && b.bytes == 0) b.pending = b.count, ++b.phase;
}

inline void mbarrier_arrive(const void* bar, unsigned expect_bytes)
{
    Mbarrier& b = mbarriers.at(bar);
    b.bytes += expect_bytes;
    if (--b.pending < 0) {
        std::fprintf(stderr, "mbarrier: more arrivals than its count\n");
        std::exit(7);
    }
    mbarrier_settle(b);
}

inline void mbarrier_wait(const void* bar, unsigned parity)
{
    for (long spins = 0; (mbarriers.at(bar).phase & 1u) == parity; ++spins) {
        if (spins > 100000) {
            std::fprintf(stderr, "mbarrier: a wait for phase parity %u never ends\n", parity);
            std::exit(7);
        }
        (*fibers)[current].yielded = true;
        swapcontext(&(*fibers)[current].context, &scheduler);
    }
}

inline void bulk_copy(void* to, const void* from, unsigned bytes, const void* bar)
{
    if (bytes % 16 || reinterpret_cast<size_t>(to) % 16 || reinterpret_cast<size_t>(from) % 16) {
        std::fprintf(stderr, "cp.async.bulk: a size or address not a multiple of 16 bytes\n");
        std::exit(7);
    }
    std::memcpy(to, from, bytes);
    Mbarrier& b = mbarriers.at(bar);
    b.bytes -= bytes;
    mbarrier_settle(b);
}
}  // namespace emu

// __syncwarp (the wgmma kernels' epilogue, a warp's rows through shared memory): the warp's 32 lanes meet, each
// yielding to the block's other threads until all have arrived (every lane of the warp live). Each meeting completes
// before a lane can arrive at the next, so a warp's count carries over from block to block.
namespace emu {
struct WarpMeeting {
    int arrived = 0;
    unsigned generation = 0;
};
inline std::vector<WarpMeeting> warp_meetings;  // by warp of the running blocks

// `count` threads meet at `meeting`, each yielding to the other threads until all have arrived (`what` names the
// meeting where they never all do).
inline void meet(WarpMeeting& meeting, int count, const char* what)
{
    const unsigned generation = meeting.generation;
    if (++meeting.arrived == count) {
        meeting.arrived = 0, ++meeting.generation;
        return;
    }
    for (long spins = 0; meeting.generation == generation; ++spins) {
        if (spins > 100000) {
            std::fprintf(stderr, "%s: its threads never all arrive\n", what);
            std::exit(7);
        }
        (*fibers)[current].yielded = true;
        swapcontext(&(*fibers)[current].context, &scheduler);
    }
}
}  // namespace emu

inline void __syncwarp(unsigned = 0xffffffffu)
{
    const size_t warps = emu::fibers->size() / 32 + 1;
    if (emu::warp_meetings.size() < warps) emu::warp_meetings.resize(warps);
    emu::meet(emu::warp_meetings[emu::current / 32], 32, "__syncwarp");
}

// bar.sync id, count (a named barrier: the warp-specialised kernel's consumers, its producer not among them): `count`
// threads of the block meet at barrier `id`. A cluster's barrier: every thread of the cluster's blocks meets; its
// rank, mapa (a block's shared-memory address as it lies in block `rank`'s: the rank in the top byte) and a load
// through it.
namespace emu {
inline std::map<std::pair<int, int>, WarpMeeting> named_meetings;  // by (block of the running ones, id)
inline void named_barrier(int id, int count)
{
    meet(named_meetings[{current / block_threads, id}], count, "bar.sync");
}
inline WarpMeeting cluster_meeting;
inline void cluster_sync() { meet(cluster_meeting, int(fibers->size()), "barrier.cluster"); }
inline unsigned cluster_rank() { return blockIdx.z % CLUSTER_Z; }
inline unsigned cluster_mapped(unsigned local, unsigned rank) { return rank << 24 | local; }
inline float cluster_load(unsigned remote)
{
    const unsigned rank = remote >> 24, byte = remote & 0xFFFFFFu;
    if (rank >= CLUSTER_Z || byte + 4 > smem_bytes || byte % 4) {
        std::fprintf(stderr, "ld.shared::cluster: rank %u, byte %u of %zu\n", rank, byte, smem_bytes);
        std::exit(6);
    }
    return cluster_smem[rank][byte / 4];
}
}  // namespace emu
#define CONVKIT_EMULATED_NAMED_BARRIER emu::named_barrier
#define CONVKIT_EMULATED_CLUSTER 1
#define __cluster_dims__(x, y, z)

// Warp shuffles (the lu2020 kernels): every thread of the block posts its value and waits, then reads its
// source lane's and waits again, so that no value is overwritten before it is read. Correct where every warp
// of the block runs the same shuffles in the same order, as the kernels run under it do.
namespace emu {
inline std::vector<float> posted;
inline float shuffle(float v, int src_lane)
{
    const int t = current, base = t - t % 32;
    if (posted.size() < fibers->size()) posted.resize(fibers->size());
    posted[t] = v;
    __syncthreads();
    const float r = posted[base + src_lane];
    __syncthreads();
    return r;
}
}  // namespace emu

inline float __shfl_up_sync(unsigned, float v, unsigned d)
{
    const int lane = emu::current % 32;
    return emu::shuffle(v, lane >= int(d) ? lane - int(d) : lane);
}
inline float __shfl_down_sync(unsigned, float v, unsigned d)
{
    const int lane = emu::current % 32;
    return emu::shuffle(v, lane + int(d) < 32 ? lane + int(d) : lane);
}
inline float __shfl_xor_sync(unsigned, float v, int m) { return emu::shuffle(v, (emu::current % 32) ^ m); }
template <class T>
inline T __ldg(const T* p) { return *p; }
inline unsigned __float_as_uint(float f)
{
    unsigned u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
inline float __uint_as_float(unsigned u)
{
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, d += a * b for the warp: the PTX ISA's fragment layout
// (lane = 4 g + t: a holds A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]; b holds B[t][g], B[t+4][g]; d holds
// D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]). The tensor core reads an operand's top 19 bits (TF32, the low
// 13 mantissa bits dropped); the sum is formed in double and rounded once, where the hardware truncates as it
// adds: this checks fragments and indexing, not the tensor core's rounding (the GPU tests check that).
namespace emu {
struct MmaPost {
    unsigned a[4], b[2];
};
inline std::vector<MmaPost> mma_posted;
inline float tf32(unsigned bits) { return __uint_as_float(bits & 0xffffe000u); }
inline void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2])
{
    const int t = current, base = t - t % 32, lane = t % 32, g = lane / 4, q = lane % 4;
    if (mma_posted.size() < fibers->size()) mma_posted.resize(fibers->size());
    std::copy(a, a + 4, mma_posted[t].a);
    std::copy(b, b + 2, mma_posted[t].b);
    __syncthreads();
    auto A = [&](int row, int k) {  // the lane and register holding A[row][k]
        return tf32(mma_posted[base + (row % 8) * 4 + k % 4].a[(row >= 8) + 2 * (k >= 4)]);
    };
    auto B = [&](int k, int col) { return tf32(mma_posted[base + col * 4 + k % 4].b[k >= 4]); };
    float out[4];
    for (int v = 0; v < 4; ++v) {
        const int row = g + 8 * (v >= 2), col = 2 * q + v % 2;
        double sum = d[v];
        for (int k = 0; k < 8; ++k) sum += double(A(row, k)) * double(B(k, col));
        out[v] = float(sum);
    }
    __syncthreads();  // every lane has read the posts before any posts its next
    std::copy(out, out + 4, d);
}
}  // namespace emu
#define CONVKIT_EMULATED_MMA emu::mma_m16n8k8_tf32

// ldmatrix.sync.aligned.m8n8.x4.shared.b16, read as 32-bit words (the 3xTF32 kernel's filter-major fragments): lane
// l gives the address of row l % 8 of matrix l / 8 (16 bytes); register i of lane l gets word l % 4 of row l / 4 of
// matrix i.
namespace emu {
inline std::vector<const float*> rows_posted;
inline void ldmatrix_x4(unsigned (&r)[4], const float* row)
{
    const int t = current, base = t - t % 32, lane = t % 32;
    if (rows_posted.size() < fibers->size()) rows_posted.resize(fibers->size());
    if (reinterpret_cast<size_t>(row) % 16) {
        std::fprintf(stderr, "ldmatrix: lane %d's row is not 16-byte aligned\n", lane);
        std::exit(5);
    }
    rows_posted[t] = row;
    __syncthreads();
    for (int i = 0; i < 4; ++i) r[i] = __float_as_uint(rows_posted[base + 8 * i + lane / 4][lane % 4]);
    __syncthreads();  // every lane has read the posts before any posts its next
}
}  // namespace emu
#define CONVKIT_EMULATED_LDMATRIX_X4 emu::ldmatrix_x4

// A kernel's own stop on a broken assumption.
[[noreturn]] inline void __trap()
{
    std::fprintf(stderr, "the kernel trapped\n");
    std::exit(7);
}

// A generic pointer into the block's dynamic shared memory as a shared-window address: its byte offset.
inline size_t __cvta_generic_to_shared(const void* p)
{
    return static_cast<size_t>(static_cast<const char*>(p) - reinterpret_cast<const char*>(emu::smem_base));
}

// wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 with both operands in shared memory (K-major, no swizzle:
// element (row, k) at start + (row / 8) SBO + (row % 8) 16 + (k / 4) LBO + (k % 4) 4 bytes, the descriptor's
// fields each stored >> 4; or the 128-byte swizzle: at start + (row / 8) SBO + (row % 8) 128 + 4 k, address bits 4-6
// XORed with bits 7-9), D 64 x N in the warpgroup's registers: thread 32 w + 4 g + q holds, for each
// 8 columns j, D[16 w + g][8 j + 2 q + e] in d[4 j + e] and D[16 w + g + 8][...] in d[4 j + 2 + e]. Operands are
// read as TF32 (the top 19 bits), the sum formed in double and rounded once (the GPU tests check the tensor
// core's own rounding); accumulate 0 overwrites D.
namespace emu {
inline float wgmma_operand(unsigned long long desc, int row, int k)
{
    const unsigned mode = unsigned(desc >> 62);
    if (mode > 1) {
        std::fprintf(stderr, "wgmma: only descriptors without swizzle or with the 128-byte one are emulated\n");
        std::exit(6);
    }
    const size_t start = size_t(desc & 0x3FFF) << 4, lbo = size_t((desc >> 16) & 0x3FFF) << 4;
    const size_t sbo = size_t((desc >> 32) & 0x3FFF) << 4;
    size_t byte = start + (row / 8) * sbo + (row % 8) * 16 + (k / 4) * lbo + (k % 4) * 4;
    if (mode == 1) {  // 128-byte swizzle: rows of 128 bytes, the 16-byte chunk (address bits 4-6) XORed with bits 7-9
        byte = start + (row / 8) * sbo + (row % 8) * 128 + k * 4;
        byte ^= ((byte >> 7) & 7) << 4;
    }
    if (byte + 4 > smem_bytes) {
        std::fprintf(stderr, "wgmma: an operand reads shared memory at byte %zu, past the block's %zu\n", byte,
                     smem_bytes);
        std::exit(6);
    }
    return tf32(__float_as_uint(smem_base[byte / 4]));
}

template <size_t Registers>  // N / 2
inline void wgmma_m64nNk8_tf32(float (&d)[Registers], unsigned long long a, unsigned long long b, int accumulate)
{
    const int t = current % 128, warp = t / 32, g = t % 32 / 4, q = t % 4;
    for (int j = 0; j < int(Registers) / 4; ++j)
        for (int v = 0; v < 4; ++v) {
            const int row = 16 * warp + g + 8 * (v >= 2), col = 8 * j + 2 * q + v % 2;
            double sum = accumulate ? d[4 * j + v] : 0.0;
            for (int k = 0; k < 8; ++k) sum += double(wgmma_operand(a, row, k)) * double(wgmma_operand(b, col, k));
            d[4 * j + v] = float(sum);
        }
}
}  // namespace emu
#define CONVKIT_EMULATED_WGMMA emu::wgmma_m64nNk8_tf32
