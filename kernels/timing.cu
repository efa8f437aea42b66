// Support for convkit.cuda.timing: a kernel that holds the stream for a while.
//
// Launched before a batch of timed runs, it keeps the GPU busy while the host enqueues the
// whole batch, so that host-side launch cost (CuPy's, or cuDNN's through ctypes) stays out of
// each run's CUDA-event time: the batch then runs back to back on the device. This is the
// "blocking kernel" of NVIDIA's nvbench.

__device__ __forceinline__ unsigned long long global_timer_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void hold_stream(long long duration_ns)
{
    const unsigned long long t0 = global_timer_ns();
    while (global_timer_ns() - t0 < (unsigned long long)duration_ns) { }
}

// Markers for convkit.book.profile: a profiled case's kernels lie between profile_begin, launched with
// as many blocks as the case's index + 1, and profile_end. They do nothing; the profiler sees them.
extern "C" __global__ void profile_begin() { }
extern "C" __global__ void profile_end() { }

// The architecture a build targets, as the device code sees it (__CUDA_ARCH__: 750 for the T4's
// compute_75 PTX, 900 for the H100): how a test proves which code paths ran.
extern "C" __global__ void cuda_arch(int* out) { *out = __CUDA_ARCH__; }
