// The sum of partial output planes, out[i] = sum_k src[k * plane + i]: what a reduction split over
// blockIdx.z leaves behind (cuConv's R*S planes and channel splits, the implicit GEMM's split-K).
// Four independent accumulators keep loads in flight. With a bias (convkit.conv2d's; null otherwise)
// out is NCHW and bias[m] is added to filter m's planes of hw elements, saving the op a launch.
// Launched early after a split-K kernel (convkit.cuda.driver.EarlyLaunch), it waits for that kernel's planes first.
// Included textually by convkit.cuda.nvrtc (NVRTC).
#pragma once
#include "dependent_launch.cuh"

extern "C" __global__ void sum_planes(const float* __restrict__ src, float* __restrict__ out, int K,
                                      long long plane, const float* __restrict__ bias, int M, long long hw)
{
    wait_for_previous_kernel();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < plane;
         i += (long long)gridDim.x * blockDim.x) {
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        int k = 0;
        for (; k + 4 <= K; k += 4) {
            a0 += src[(long long)k * plane + i];
            a1 += src[(long long)(k + 1) * plane + i];
            a2 += src[(long long)(k + 2) * plane + i];
            a3 += src[(long long)(k + 3) * plane + i];
        }
        for (; k < K; ++k) a0 += src[(long long)k * plane + i];
        const float sum = (a0 + a1) + (a2 + a3);
        out[i] = bias ? sum + __ldg(bias + (i / hw) % M) : sum;
    }
}
