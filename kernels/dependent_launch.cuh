// Programmatic dependent launch (compute capability 9.0 on): a kernel launched with the programmatic stream
// serialization attribute (convkit.cuda.driver.EarlyLaunch) may start while the kernel before it in its stream still
// runs, once that kernel's blocks have all let it (let_next_kernel_start) or exited; it waits for that kernel's end
// and its writes (wait_for_previous_kernel) before it reads them. Each is a no-op in a kernel launched the ordinary
// way, and on older GPUs (and the CPU emulator), where nothing is launched early.
#pragma once

__device__ __forceinline__ void wait_for_previous_kernel()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void let_next_kernel_start()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
