// The 3xTF32 split of an FP32 value into two TF32 operands, for implicit_gemm_tf32x3.cu, for the kernels that
// write its weights split ahead (its split_weights_tf32x3, winograd.cu's winograd_transforms) and for every operand
// of the wgmma kernels (wgmma_tf32x3.cu). Included textually by convkit.cuda.nvrtc (NVRTC) and by nvcc from this
// directory.
#pragma once

namespace tf32 {
// a rounded to nearest TF32, ties away from zero, as a TF32 operand's bits (cvt.rna.tf32.f32's).
__device__ __forceinline__ unsigned round_tf32(unsigned bits) { return (bits + 0x1000u) & 0xffffe000u; }

// a = big + small, each a TF32 operand in a 32-bit register: big is a rounded to nearest, ties away from
// zero (the bits of cvt.rna.tf32.f32, in two integer operations: add half of the dropped range, clear it);
// small = a - big (exact in FP32) goes to the tensor core whole, which reads a TF32 operand's top 19 bits:
// small is truncated there, within 2^-21 of a. Measured on the H100: 20% faster than rounding small with
// cvt.rna as well (three instructions fewer per value), the error the same within 3%.
__device__ __forceinline__ void split(float a, unsigned& big, unsigned& small)
{
    big = round_tf32(__float_as_uint(a));
    small = __float_as_uint(a - __uint_as_float(big));
}

// Both parts of a split ahead of the loop, as float bit patterns: the small part as it is, which the tensor core
// truncates as it does in the loop (rounding it too would change nothing but the tie's direction: with big rounded to
// nearest, what TF32 drops of the small part is never more than half its last place).
__device__ __forceinline__ void split_ahead(float a, float& big, float& small)
{
    unsigned b, s;
    split(a, b, s);
    big = __uint_as_float(b);
    small = __uint_as_float(s);
}

// Four at once (a 16-byte line of operands), as the wgmma kernels split their inputs: gathered, split ahead, or
// split in shared memory once staged. (The value itself as the big part, which the tensor core truncates, and the
// rest as the small one saves the big part's rounding but doubles the small part and the small*small term 3xTF32
// leaves out: 2.4e-7 against 1.2e-7 for the SIMT FP32 kernel at K = 288, H200, 2026-12-02.)
__device__ __forceinline__ void split_ahead(float4 a, float4& big, float4& small)
{
    split_ahead(a.x, big.x, small.x);
    split_ahead(a.y, big.y, small.y);
    split_ahead(a.z, big.z, small.z);
    split_ahead(a.w, big.w, small.w);
}
}  // namespace tf32
