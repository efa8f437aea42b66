// The GPU's ceilings: the roofline every chapter measures against (notebook 00).
//
// fma_peak: the FP32 FMA rate an ordinary kernel reaches. Each thread runs CHAINS independent
//   FMA chains (enough to cover the 4-cycle FMA latency on every scheduler) for `iters` rounds;
//   the result is stored so the compiler keeps the work. FLOPs = 2 * CHAINS * 16 * iters * threads.
//   a and b are run-time values (a^(16 iters) = 1.1 from the host) so nothing folds at compile
//   time and the values stay normal: no inf or denormal slows the FMA pipe.
// pointer_chase: global-memory load latency in SM cycles, as Chang 2022 section 2.2 needs it
//   (its Table 1 starts from the latency in cycles). One thread follows a random cyclic chain
//   of indices laid out in `footprint` bytes: each load's address depends on the previous
//   load, so nothing overlaps and clock64() over `steps` loads gives cycles per load. A
//   footprint far beyond L2 gives DRAM latency; small ones show L1 and L2.
// clock_rate: SM cycles counted against the global nanosecond timer, to convert cycles to
//   time at the clock the GPU actually runs under load.
// launch_floor: a launch that does nothing but show it ran (each block's thread 0 writes the
//   block's index): the least any kernel timed with CUDA events costs, the roofline floors' launch.
// tf32_mma_peak: the TF32 tensor-core rate of mma.sync.m16n8k8 (the instruction of the 3xTF32 kernels, ours and
//   CUTLASS's SM80 ones): each warp keeps MMA_CHAINS independent accumulator tiles (enough to cover the
//   instruction's latency) for `iters` rounds on fixed fragments of a and b. With a * b a power of two, every
//   sum is exact: each output is MMA_CHAINS * 4 * iters * 8 * a * b. FLOPs = 2 * 16 * 8 * 8 * MMA_CHAINS * iters
//   per warp. Compute capability 8.0 and later (a T4 build traps: the measurement declines before launching).
// int8_mma_peak: the INT8 tensor-core rate of mma.sync.m16n8k32 (s8 by s8 into s32; the products of an FP32 GEMM
//   emulated on INT8, the Ozaki scheme's), as tf32_mma_peak: MMA_CHAINS accumulator tiles a warp on fixed fragments,
//   `a` and `b` four bytes each from the host (every byte 1, so each output gains 32 a product and every sum is exact:
//   the thread's total is MMA_CHAINS * 4 * 32 * iters). OPs = 2 * 16 * 8 * 32 * MMA_CHAINS * iters per warp.
//   Compute capability 8.0 and later.
// tf32_wgmma_peak, int8_wgmma_peak: the same two rates on Hopper's own instruction (wgmma, sm_90a: what its TF32 and
//   INT8 GEMMs issue), m64n256k8 on TF32 into FP32 and m64n256k32 on INT8 into 32-bit integers. WGMMA_WARPGROUPS
//   warpgroups a block, a block an SM, each issuing WGMMA_BATCH products a group on its 64 x 256 accumulator tile,
//   one group left running as the next is issued, `iters` groups; both operands from shared memory (A 64 rows, B 256,
//   32 bytes each: k = 8 TF32 values or 32 INT8 ones), every element `a` or `b` (TF32: their product a power of two;
//   INT8: four ones a word), so every sum is exact: each of a thread's 128 outputs is iters * WGMMA_BATCH * k * a * b.
//   FLOPs (OPs) = 2 * 64 * 256 * k * WGMMA_BATCH * iters a warpgroup. Built for sm_90a alone (elsewhere they trap).

#include "wgmma.cuh"

#define FMA_CHAINS 8  // independent chains per thread: 8 > FMA latency (4) x issue rate (1/clk per scheduler lane)

extern "C" __global__ void fma_peak(float* __restrict__ out, float seed, float a, float b, int iters)
{
    float acc[FMA_CHAINS];
#pragma unroll
    for (int k = 0; k < FMA_CHAINS; ++k) acc[k] = seed + (float)(threadIdx.x + k);
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < 16; ++u) {
#pragma unroll
            for (int k = 0; k < FMA_CHAINS; ++k) acc[k] = fmaf(acc[k], a, b);
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < FMA_CHAINS; ++k) sum += acc[k];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

extern "C" __global__ void pointer_chase(const unsigned int* __restrict__ chain, int steps,
                                         unsigned int* __restrict__ sink, long long* __restrict__ cycles)
{
    unsigned int j = 0;
    // Warm the TLB and the caches along the path once, then time a second pass.
    for (int i = 0; i < steps; ++i) j = __ldcg(chain + j);
    const long long start = clock64();
    for (int i = 0; i < steps; ++i) j = __ldcg(chain + j);
    const long long stop = clock64();
    sink[0] = j;  // the dependency chain must be observable
    cycles[0] = stop - start;
}

__device__ __forceinline__ unsigned long long global_timer_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void clock_rate(long long spin_ns, long long* __restrict__ result)
{
    const unsigned long long t0 = global_timer_ns();
    const long long c0 = clock64();
    while (global_timer_ns() - t0 < (unsigned long long)spin_ns) { }
    const long long c1 = clock64();
    const unsigned long long t1 = global_timer_ns();
    result[0] = c1 - c0;
    result[1] = (long long)(t1 - t0);
}

extern "C" __global__ void launch_floor(int* __restrict__ ran)
{
    if (threadIdx.x == 0) ran[blockIdx.x] = blockIdx.x;
}

#define MMA_CHAINS 8  // independent m16n8k8 accumulators per warp

// Both mma.sync ceilings: MMA_CHAINS accumulator tiles of 4 `Acc` a thread, `product(tile)` issuing one instruction
// on a tile, `iters` rounds; each thread's sum of its tiles stored.
template <typename Acc, typename Product>
__device__ __forceinline__ void mma_peak(Acc* __restrict__ out, int iters, Product product)
{
    Acc acc[MMA_CHAINS][4];
#pragma unroll
    for (int k = 0; k < MMA_CHAINS; ++k) acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int k = 0; k < MMA_CHAINS; ++k) product(acc[k]);
    }
    Acc sum = 0;
#pragma unroll
    for (int k = 0; k < MMA_CHAINS; ++k) sum += (acc[k][0] + acc[k][1]) + (acc[k][2] + acc[k][3]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

extern "C" __global__ void tf32_mma_peak(float* __restrict__ out, float a, float b, int iters)
{
#if __CUDA_ARCH__ >= 800
    const unsigned fa = __float_as_uint(a) & 0xffffe000u, fb = __float_as_uint(b) & 0xffffe000u;
    mma_peak(out, iters, [&](float (&d)[4]) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(fa), "r"(fb));
    });
#else
    __trap();
#endif
}

extern "C" __global__ void int8_mma_peak(int* __restrict__ out, unsigned a, unsigned b, int iters)
{
#if __CUDA_ARCH__ >= 800
    mma_peak(out, iters, [&](int (&d)[4]) {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, "
                     "{%0,%1,%2,%3};\n"
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]) : "r"(a), "r"(b));
    });
#else
    __trap();
#endif
}

#define WGMMA_WARPGROUPS 2  // warpgroups a block (a block an SM), each on its own accumulators
#define WGMMA_BATCH 8       // products a group

// Both wgmma ceilings: `Acc` float (TF32) or int (INT8); `word` every 32-bit word of both operands.
template <typename Acc>
__device__ __forceinline__ void wgmma_peak(Acc* __restrict__ out, unsigned word, int iters)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ __align__(128) unsigned a[64 * 8], b[256 * 8];  // 32 bytes a row
    for (int i = threadIdx.x; i < 64 * 8; i += blockDim.x) a[i] = word;
    for (int i = threadIdx.x; i < 256 * 8; i += blockDim.x) b[i] = word;
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the stores, before the tensor cores read
    __syncthreads();
    const unsigned long long da = wgmma::descriptor(a, 64), db = wgmma::descriptor(b, 256);
    Acc acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0;
    for (int i = 0; i < iters; ++i) {
        wgmma::fence_operands();
#pragma unroll
        for (int j = 0; j < WGMMA_BATCH; ++j) wgmma::mma(acc, da, db, 1);
        wgmma::commit();
        wgmma::wait<1>();
    }
    wgmma::wait<0>();
    Acc sum = 0;
#pragma unroll
    for (int i = 0; i < 128; ++i) sum += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
#else
    __trap();
#endif
}

extern "C" __global__ void __launch_bounds__(128 * WGMMA_WARPGROUPS, 1)
tf32_wgmma_peak(float* __restrict__ out, float ab, int iters)
{
    wgmma_peak(out, __float_as_uint(ab) & 0xffffe000u, iters);
}

extern "C" __global__ void __launch_bounds__(128 * WGMMA_WARPGROUPS, 1)
int8_wgmma_peak(int* __restrict__ out, unsigned bytes, int iters)
{
    wgmma_peak(out, bytes, iters);
}
