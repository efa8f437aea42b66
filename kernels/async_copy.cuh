// Asynchronous global -> shared copies (cp.async, sm_80 and later) with a synchronous fallback for
// Turing (Colab's T4), shared by the kernels that double-buffer their inputs. Included textually by
// convkit.compile (NVRTC) and by nvcc from this directory.
#pragma once

// 4 bytes; `valid` false writes 0 (cp.async zero-fills what it does not read).
__device__ __forceinline__ void copy4(float* dst, const float* src, bool valid)
{
#if __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 4 : 0));
#else
    *dst = valid ? *src : 0.0f;  // Turing has no cp.async: a synchronous copy
#endif
}

// 16 bytes, of which `bytes` (0 or 16) are read and the rest zero-filled.
__device__ __forceinline__ void copy16(float* dst, const float* src, int bytes)
{
#if __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
#else
    *reinterpret_cast<float4*>(dst) = bytes ? *reinterpret_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// Close the group of copies issued since the last commit.
__device__ __forceinline__ void commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Wait until at most kPending committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_stages()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}
