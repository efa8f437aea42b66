// The split-ahead wgmma kernel's operands as they are split ahead for it: by wgmma_tf32x3.cu (the weights, tiled, and
// the input, channels last) and by winograd.cu's transforms (Winograd's transformed filters and inputs, the same
// layouts). One definition of the layouts both write; convkit.families.tf32x3.wgmma_operands says the same in Python.
// Included textually by convkit.cuda.nvrtc (NVRTC) and by nvcc from this directory.
#pragma once

namespace wgmma_operands {
// A K-tile: 32 channels at one filter tap (the input's channels-last rows are padded to a multiple of it); with tap
// pairs (the direct split-ahead kernel on at most 16 channels) two taps of rows PAIRED_CHANNELS wide.
constexpr int CHANNELS = 32, PAIRED_CHANNELS = CHANNELS / 2;
// The filters a block of Winograd's products computes (the split-ahead kernel's default, 128).
constexpr int WINOGRAD_FILTERS = 128;

__host__ __device__ constexpr int padded_channels(int C) { return (C + CHANNELS - 1) / CHANNELS * CHANNELS; }

// The tiled weights, blocks of `filters` filters by K-tiles, each K-tile as it lies in a stage: its big plane, then
// its small one, each [k-group of 4][row][4]. Where row `row`'s k-group `kgroup` of K-tile `tile_of` (m-block x
// K-tiles + K-tile) begins in the big plane; the small plane's lies filters x CHANNELS floats on.
__host__ __device__ constexpr long long tiled_line(long long tile_of, int kgroup, int row, int filters)
{
    return tile_of * 2 * filters * CHANNELS + (kgroup * filters + row) * 4;
}
}  // namespace wgmma_operands
