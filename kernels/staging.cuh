// Staging inputs in shared memory, for the kernels that double-buffer them: asynchronous global ->
// shared copies (cp.async, sm_80 and later, with a synchronous fallback for Turing, Colab's T4), the
// row stride that keeps float4 reads of the staged rows free of bank conflicts, and the double-buffered
// loop over stages. Included textually by convkit.cuda.nvrtc (NVRTC) and by nvcc from this directory.
#pragma once

// Row stride (floats) of a staged window `width` floats wide: the smallest multiple of 4 from `width`
// at which one LDS.128 phase (8 lanes, `threads_x` lanes per thread row, each reading 4 adjacent
// floats, thread rows `rows_apart` staged rows apart) hits 32 distinct banks; `width` rounded up if
// none does. Mirrored by convkit.cuda.launch.staged_row_stride.
constexpr int conflict_free_stride(int width, int threads_x, int rows_apart)
{
    const int first = (width + 3) / 4 * 4;
    if (threads_x >= 8) return first;
    for (int stride = first; stride < first + 32; stride += 4) {  // banks repeat every 32 words
        unsigned banks = 0;
        bool free = true;
        for (int lane = 0; lane < 8; ++lane) {
            const int word = (lane / threads_x) * rows_apart * stride + (lane % threads_x) * 4;
            for (int k = 0; k < 4; ++k) {
                const unsigned bit = 1u << ((word + k) % 32);
                if (banks & bit) free = false;
                banks |= bit;
            }
        }
        if (free) return stride;
    }
    return first;
}

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

// The double-buffered pipeline of `stages` stages in `buffers` (two of `stage_floats`): stage i is
// computed from buffer i & 1 while stage i + 1 is copied into the other. The caller has issued and
// committed stage 0's copies into the first buffer; `load(buffer, i)` issues stage i's copies and
// `compute(buffer, i)` uses them. Every thread of the block calls it (it holds barriers).
template <class Load, class Compute>
__device__ __forceinline__ void double_buffered(
    float* buffers, int stage_floats, int stages, Load load, Compute compute)
{
    for (int i = 0; i < stages; ++i) {
        if (i + 1 < stages) {  // prefetch the next stage into the other buffer
            load(buffers + ((i + 1) & 1) * stage_floats, i + 1);
            commit();
            wait_stages<1>();
        } else {
            wait_stages<0>();
        }
        __syncthreads();
        compute(buffers + (i & 1) * stage_floats, i);
        __syncthreads();  // the next prefetch overwrites this buffer
    }
}
