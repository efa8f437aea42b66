// Plain direct convolution: the study's floor and the first kernel through the whole pipeline.
//
// Not from a paper: the naive formulation every paper starts from ("one thread per output
// element", cuConv section 3 and Chang 2022 section 1 describe it as the baseline). Each
// thread computes y[n][m][p][q] = sum_{c,r,s} x[n][c][p*stride+r-pad][q*stride+s-pad] * w[m][c][r][s]
// (cross-correlation, as cuDNN), skipping taps that fall in the zero padding.
//
// Layout: x NCHW, w MCRS, y NMPQ, all float32, C-contiguous. FP32 FMA accumulation in the
// order c, r, s. No data reuse beyond what the L1/L2 caches find: every tap is a global load.
// 64-bit indices, so batches larger than 2^31 elements are safe. A grid-stride loop lets the
// launcher cap the grid.

extern "C" __global__ void conv2d_direct(
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
    int N, int C, int H, int W, int M, int R, int S, int P, int Q, int pad, int stride)
{
    const long long total = (long long)N * M * P * Q;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const int q = (int)(idx % Q);
        const int p = (int)((idx / Q) % P);
        const int m = (int)((idx / ((long long)Q * P)) % M);
        const long long n = idx / ((long long)Q * P * M);
        const int h0 = p * stride - pad;
        const int w0 = q * stride - pad;
        const float* xn = x + n * C * H * W;
        const float* wm = w + (long long)m * C * R * S;
        float acc = 0.0f;
        for (int c = 0; c < C; ++c) {
            const float* xc = xn + (long long)c * H * W;
            const float* wc = wm + c * R * S;
            for (int r = 0; r < R; ++r) {
                const int h = h0 + r;
                if (h < 0 || h >= H) continue;
                for (int s = 0; s < S; ++s) {
                    const int ww = w0 + s;
                    if (ww < 0 || ww >= W) continue;
                    acc = fmaf(xc[h * W + ww], wc[r * S + s], acc);
                }
            }
        }
        y[idx] = acc;
    }
}
