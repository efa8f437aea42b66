// One launch of a convolution kernel under cuda_emu.h, checked against a float64 reference on random
// inputs (output poisoned with NaN). Built by tests/test_kernels_emulated.py with the kernel's source
// as kernel_source.cu and -DKERNEL_CALL=<the call, in terms of x, w, out, ints, counters>.
// argv: C H W M K grid_x grid_y grid_z threads shared_bytes w_offset out_offset seed ints...
// Prints "rel_err E nans N counters_zero Z"; exits 1 where any is wrong.
#include "cuda_emu.h"
#include "kernel_source.cu"

#include <random>

int main(int argc, char** argv)
{
    std::vector<int> a;
    for (int i = 1; i < argc; ++i) a.push_back(std::atoi(argv[i]));
    const int C = a[0], H = a[1], W = a[2], M = a[3], K = a[4], pad = (K - 1) / 2;
    const dim3 grid{unsigned(a[5]), unsigned(a[6]), unsigned(a[7])}, block{unsigned(a[8]), 1, 1};
    const size_t shared = a[9];
    const int w_offset = a[10], out_offset = a[11];  // floats past a 16-byte boundary
    const int* ints = a.data() + 13;
    std::mt19937 rng(a[12]);
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    const size_t x_size = size_t(C) * H * W, w_size = size_t(M) * C * K * K, out_size = size_t(M) * H * W;
    std::vector<float4> x_buf(x_size / 4 + 1), w_buf(w_size / 4 + 2), out_buf(out_size / 4 + 2);
    float* x = &x_buf[0].x;
    float* w = &w_buf[0].x + w_offset;
    float* out = &out_buf[0].x + out_offset;
    for (size_t i = 0; i < x_size; ++i) x[i] = uniform(rng);
    for (size_t i = 0; i < w_size; ++i) w[i] = uniform(rng);
    std::fill_n(out, out_size, NAN);
    std::vector<int> counters(3 * grid.x * grid.y * grid.z, 0);  // at least the kernels' 3 per tile
    emu::launch(grid, block, shared, dynamic_smem, [&] { KERNEL_CALL; });

    double err = 0, norm = 0;
    long nans = 0;
    for (int m = 0; m < M; ++m)
        for (int y = 0; y < H; ++y)
            for (int xx = 0; xx < W; ++xx) {
                double ref = 0;
                for (int c = 0; c < C; ++c)
                    for (int r = 0; r < K; ++r)
                        for (int s = 0; s < K; ++s) {
                            const int iy = y + r - pad, ix = xx + s - pad;
                            if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                ref += double(w[((size_t(m) * C + c) * K + r) * K + s]) * x[(size_t(c) * H + iy) * W + ix];
                        }
                const double got = out[(size_t(m) * H + y) * W + xx];
                nans += std::isnan(got);
                err += (got - ref) * (got - ref);
                norm += ref * ref;
            }
    bool counters_zero = true;
    for (int v : counters) counters_zero &= v == 0;
    const double rel_err = std::sqrt(err / norm);
    std::printf("rel_err %.3e nans %ld counters_zero %d\n", rel_err, nans, int(counters_zero));
    return nans || !(rel_err < 1e-5) || !counters_zero;
}
