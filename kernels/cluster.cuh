// Thread-block clusters (compute capability 9.0 on): the cluster's barrier, a block's rank in its cluster, and loads
// from another block's shared memory (distributed shared memory). Included by wgmma_tf32x3.cu, whose gathering kernel
// adds a K split's partial sums across a cluster. Under tests/cuda_emulator (CONVKIT_EMULATED_CLUSTER) the emulator's
// stand-ins, which run a cluster's blocks together; elsewhere outside an sm_90a build the bodies are empty.
#pragma once

namespace cluster {
// Every thread of every block of the cluster arrives, then waits for all: the shared-memory writes of each before,
// visible to the others' reads after (release, acquire). Each warp's threads all take it (.aligned).
__device__ __forceinline__ void sync()
{
#if defined(CONVKIT_EMULATED_CLUSTER)
    emu::cluster_sync();
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

// This block's rank in its cluster.
__device__ __forceinline__ unsigned rank()
{
    unsigned r = 0;
#if defined(CONVKIT_EMULATED_CLUSTER)
    r = emu::cluster_rank();
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
    return r;
}

// The address in the cluster's shared-memory window of the float at `local` in this block's shared memory (a
// 32-bit shared address) as it lies in block `rank`'s.
__device__ __forceinline__ unsigned mapped(unsigned local, unsigned rank)
{
    unsigned remote = 0;
#if defined(CONVKIT_EMULATED_CLUSTER)
    remote = emu::cluster_mapped(local, rank);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
#endif
    return remote;
}

// The float at `remote`, an address mapped() into another block's shared memory.
__device__ __forceinline__ float load(unsigned remote)
{
    float value = 0.0f;
#if defined(CONVKIT_EMULATED_CLUSTER)
    value = emu::cluster_load(remote);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(value) : "r"(remote));
#endif
    return value;
}
}  // namespace cluster
