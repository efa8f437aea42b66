// One launch of a convolution kernel under cuda_emu.h, for tests/test_kernels_emulated.py: reads x and w
// (float32, raw), poisons out with NaN, runs the launch and writes out. Built with the kernel's source as
// kernel_source.cu and -DKERNEL_CALL=<the call, in terms of x, w, out, ints, counters>.
// argv: x_file w_file out_file C H W M K grid_x grid_y grid_z threads shared_bytes w_offset out_offset ints...
// Prints "counters_zero Z" and exits 1 where the split counters are not left zero.
#include "cuda_emu.h"
#include "kernel_source.cu"

#include <fstream>

static void read_floats(const char* path, float* dst, size_t count)
{
    std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(dst), count * sizeof(float));
}

int main(int argc, char** argv)
{
    std::vector<int> a;
    for (int i = 4; i < argc; ++i) a.push_back(std::atoi(argv[i]));
    const int C = a[0], H = a[1], W = a[2], M = a[3], K = a[4];
    const dim3 grid{unsigned(a[5]), unsigned(a[6]), unsigned(a[7])}, block{unsigned(a[8]), 1, 1};
    const size_t shared = a[9];
    const int w_offset = a[10], out_offset = a[11];  // floats past a 16-byte boundary
    const int* ints = a.data() + 12;
    const size_t x_size = size_t(C) * H * W, w_size = size_t(M) * C * K * K, out_size = size_t(M) * H * W;
    std::vector<float4> x_buf(x_size / 4 + 1), w_buf(w_size / 4 + 2), out_buf(out_size / 4 + 2);
    float* x = &x_buf[0].x;
    float* w = &w_buf[0].x + w_offset;
    float* out = &out_buf[0].x + out_offset;
    read_floats(argv[1], x, x_size);
    read_floats(argv[2], w, w_size);
    std::fill_n(out, out_size, NAN);
    std::vector<int> counters(3 * grid.x * grid.y * grid.z, 0);  // at least the kernels' 3 per tile
    emu::launch(grid, block, shared, dynamic_smem, [&] { KERNEL_CALL; });
    std::ofstream(argv[3], std::ios::binary).write(reinterpret_cast<const char*>(out), out_size * sizeof(float));
    bool counters_zero = true;
    for (int v : counters) counters_zero &= v == 0;
    std::printf("counters_zero %d\n", int(counters_zero));
    return !counters_zero;
}
