// The 3xTF32 split of an FP32 value into two TF32 operands, for implicit_gemm_tf32x3.cu and for the kernels that
// write its weights split ahead (its split_weights_tf32x3, winograd.cu's winograd_transforms). Included
// textually by convkit.cuda.nvrtc (NVRTC) and by nvcc from this directory.
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

// The inputs' split for the wgmma kernels that read them split ahead or split as staged: the big part is the value
// itself, of which the tensor core reads the top 19 bits (it truncates to TF32), and the small part a - that
// truncation, exact in FP32 (the 13 bits the tensor core drops), which it truncates in turn: within 2^-20 of a, where
// big rounded to nearest keeps 2^-21. So the big part needs no store of its own: a value copied as it stands is it,
// and a producer splitting its inputs as it stages them writes the small plane alone.
__device__ __forceinline__ float small_of_truncated(float a)
{
    return a - __uint_as_float(__float_as_uint(a) & 0xffffe000u);
}

// Four at once (a 16-byte line of operands).
__device__ __forceinline__ float4 small_of_truncated(float4 a)
{
    return make_float4(small_of_truncated(a.x), small_of_truncated(a.y), small_of_truncated(a.z),
                       small_of_truncated(a.w));
}
}  // namespace tf32
