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

extern "C" __global__ void tf32_mma_peak(float* __restrict__ out, float a, float b, int iters)
{
#if __CUDA_ARCH__ >= 800
    const unsigned fa = __float_as_uint(a) & 0xffffe000u, fb = __float_as_uint(b) & 0xffffe000u;
    float acc[MMA_CHAINS][4];
#pragma unroll
    for (int k = 0; k < MMA_CHAINS; ++k) acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0.0f;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int k = 0; k < MMA_CHAINS; ++k) {
            asm volatile(
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, "
                "{%0,%1,%2,%3};\n"
                : "+f"(acc[k][0]), "+f"(acc[k][1]), "+f"(acc[k][2]), "+f"(acc[k][3])
                : "r"(fa), "r"(fb));
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < MMA_CHAINS; ++k) sum += (acc[k][0] + acc[k][1]) + (acc[k][2] + acc[k][3]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
#else
    __trap();
#endif
}

extern "C" __global__ void int8_mma_peak(int* __restrict__ out, unsigned a, unsigned b, int iters)
{
#if __CUDA_ARCH__ >= 800
    int acc[MMA_CHAINS][4];
#pragma unroll
    for (int k = 0; k < MMA_CHAINS; ++k) acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int k = 0; k < MMA_CHAINS; ++k) {
            asm volatile(
                "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, "
                "{%0,%1,%2,%3};\n"
                : "+r"(acc[k][0]), "+r"(acc[k][1]), "+r"(acc[k][2]), "+r"(acc[k][3])
                : "r"(a), "r"(b));
        }
    }
    int sum = 0;
#pragma unroll
    for (int k = 0; k < MMA_CHAINS; ++k) sum += (acc[k][0] + acc[k][1]) + (acc[k][2] + acc[k][3]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
#else
    __trap();
#endif
}
