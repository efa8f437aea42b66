// CUTLASS's convolution forward (fprop) as a peer of convkit's kernels: its SM80 3xTF32 kernels ("fast
// accurate FP32", cutlass::arch::OpMultiplyAddFastF32, as in example 28 of NVIDIA/cutlass) and its SIMT FP32
// kernels, each at a few threadblock tiles, behind a C ABI that convkit.libs.cutlass calls through ctypes.
// Built by nvcc from the headers of the nvidia-cutlass wheel, for sm_80 (and sm_90 from the same source:
// CUTLASS's SM80 kernels are the H100's only 3xTF32 kernels). NHWC activations and KRSC filters, float32,
// 16-byte aligned with C and K multiples of 4 (CUTLASS's 128-bit accesses); the caller transforms layouts.
#include <cuda_runtime.h>

#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/device/implicit_gemm_convolution.h"
#include "cutlass/conv/kernel/default_conv2d_fprop.h"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"

namespace {
using Layout = cutlass::layout::TensorNHWC;
using Epilogue = cutlass::epilogue::thread::LinearCombination<float, 4, float, float>;
using Swizzle = cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>;

template <class Tile, class Warp, int Stages>
using TensorOp3xTF32 = cutlass::conv::device::ImplicitGemmConvolution<typename cutlass::conv::kernel::DefaultConv2dFprop<
    float, Layout, float, Layout, float, Layout, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, Tile, Warp,
    cutlass::gemm::GemmShape<16, 8, 8>, Epilogue, Swizzle, Stages, cutlass::arch::OpMultiplyAddFastF32,
    cutlass::conv::IteratorAlgorithm::kOptimized>::Kernel>;

template <class Tile, class Warp, int Stages>
using Simt = cutlass::conv::device::ImplicitGemmConvolution<typename cutlass::conv::kernel::DefaultConv2dFprop<
    float, Layout, float, Layout, float, Layout, float, cutlass::arch::OpClassSimt, cutlass::arch::Sm80, Tile, Warp,
    cutlass::gemm::GemmShape<1, 1, 1>, cutlass::epilogue::thread::LinearCombination<float, 1, float, float>, Swizzle,
    Stages, cutlass::arch::OpMultiplyAdd, cutlass::conv::IteratorAlgorithm::kOptimized>::Kernel>;

using cutlass::gemm::GemmShape;
// The kernels, by the index convkit.libs.cutlass.KERNELS gives them (keep the two lists in step).
using K0 = TensorOp3xTF32<GemmShape<128, 64, 16>, GemmShape<64, 32, 16>, 3>;  // example 28's
using K1 = TensorOp3xTF32<GemmShape<128, 128, 16>, GemmShape<64, 64, 16>, 3>;
using K2 = TensorOp3xTF32<GemmShape<64, 64, 16>, GemmShape<32, 32, 16>, 4>;
using K3 = TensorOp3xTF32<GemmShape<256, 64, 16>, GemmShape<64, 64, 16>, 3>;
using K4 = Simt<GemmShape<128, 128, 8>, GemmShape<32, 64, 8>, 4>;
using K5 = Simt<GemmShape<64, 64, 8>, GemmShape<32, 32, 8>, 4>;

struct Problem {
    int n, h, w, c, k, r, s, p, q, pad, stride, split_k;
};

cutlass::conv::Conv2dProblemSize problem_size(const Problem& pr)
{
    return cutlass::conv::Conv2dProblemSize({pr.n, pr.h, pr.w, pr.c}, {pr.k, pr.r, pr.s, pr.c},
                                            {pr.pad, pr.pad, pr.pad, pr.pad}, {pr.stride, pr.stride}, {1, 1},
                                            {pr.n, pr.p, pr.q, pr.k}, cutlass::conv::Mode::kCrossCorrelation,
                                            pr.split_k);
}

// What one kernel does with one problem: 0 workspace bytes / can_implement / run, as `action` asks.
template <class Op>
long long act(int action, const Problem& pr, const float* x, const float* w, float* y, void* workspace,
              cudaStream_t stream)
{
    const auto size = problem_size(pr);
    Layout lx = Layout::packed({pr.n, pr.h, pr.w, pr.c}), lw = Layout::packed({pr.k, pr.r, pr.s, pr.c});
    Layout ly = Layout::packed({pr.n, pr.p, pr.q, pr.k});
    typename Op::Arguments args{size,
                                {const_cast<float*>(x), lx},
                                {const_cast<float*>(w), lw},
                                {y, ly},
                                {y, ly},
                                {1.0f, 0.0f}};
    Op op;
    if (action == 0) return static_cast<long long>(op.get_workspace_size(args));
    cutlass::Status status = op.can_implement(args);
    if (status != cutlass::Status::kSuccess || action == 1) return -static_cast<long long>(status);
    status = op.initialize(args, workspace, stream);
    if (status == cutlass::Status::kSuccess) status = op(stream);
    return -static_cast<long long>(status);
}
}  // namespace

// action 0: the workspace bytes; 1: 0 if the kernel can run the problem, else -(cutlass::Status); 2: run it
// on `stream` (0 on success, else -(cutlass::Status)). -1000: no such kernel.
extern "C" long long convkit_cutlass_fprop(int kernel, int action, int n, int h, int w, int c, int k, int r, int s,
                                           int p, int q, int pad, int stride, int split_k, const float* x,
                                           const float* filters, float* y, void* workspace, cudaStream_t stream)
{
    const Problem pr{n, h, w, c, k, r, s, p, q, pad, stride, split_k};
    switch (kernel) {
        case 0: return act<K0>(action, pr, x, filters, y, workspace, stream);
        case 1: return act<K1>(action, pr, x, filters, y, workspace, stream);
        case 2: return act<K2>(action, pr, x, filters, y, workspace, stream);
        case 3: return act<K3>(action, pr, x, filters, y, workspace, stream);
        case 4: return act<K4>(action, pr, x, filters, y, workspace, stream);
        case 5: return act<K5>(action, pr, x, filters, y, workspace, stream);
        default: return -1000;
    }
}
