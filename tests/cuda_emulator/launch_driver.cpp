// One launch of a kernel under cuda_emu.h over arrays of any size, for the implicit GEMM tests: reads x and w
// (float32, raw), poisons out with NaN, runs the launch and writes out whole. Built with the kernel's source as
// kernel_source.cu and -DKERNEL_CALL=<the call, in terms of x, w, out and ints>.
// argv: x_file w_file out_file x_floats w_floats out_floats grid_x grid_y grid_z block_x block_y shared_bytes ints...
#include "cuda_emu.h"
#include "kernel_source.cu"

#include <fstream>

static std::vector<float4> read_floats(const char* path, size_t count)
{
    std::vector<float4> buf(count / 4 + 1);
    std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(buf.data()), count * sizeof(float));
    return buf;
}

int main(int argc, char** argv)
{
    std::vector<long long> a;
    for (int i = 4; i < argc; ++i) a.push_back(std::atoll(argv[i]));
    const size_t out_size = size_t(a[2]);
    std::vector<float4> x_buf = read_floats(argv[1], size_t(a[0])), w_buf = read_floats(argv[2], size_t(a[1]));
    std::vector<float4> out_buf(out_size / 4 + 1);
    float* x = &x_buf[0].x;
    float* w = &w_buf[0].x;
    float* out = &out_buf[0].x;
    std::fill_n(out, out_size, NAN);
    const dim3 grid{unsigned(a[3]), unsigned(a[4]), unsigned(a[5])}, block{unsigned(a[6]), unsigned(a[7]), 1};
    const long long* ints = a.data() + 9;
    emu::launch(grid, block, size_t(a[8]), dynamic_smem, [&] { KERNEL_CALL; });
    std::ofstream(argv[3], std::ios::binary).write(reinterpret_cast<const char*>(out), out_size * sizeof(float));
    return 0;
}
