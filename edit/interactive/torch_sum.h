// torch's float32 sum on the CPU, bit for bit: nninteractive 2.6.0 normalises the image with
// crop.mean() (the sum of a float32 crop, then divided by its count in float), and that sum's
// rounding depends on how torch orders the additions. This reproduces ATen's cascade_sum
// (aten/src/ATen/native/cpu/SumKernel.cpp) for a box of a (z, y, x) volume: rows along x summed
// with 4 vector accumulators of `vector_width` lanes (8: AVX2, torch's capability on machines
// without AVX-512) in up to 4 levels, the tail and the lanes added in order, row sums accumulated
// into the output; with several threads (two_pass_reduction) the element range is split into
// ceil(n / threads) chunks (at most one per 32768 elements), each summed alone, then added in
// order. Checked against torch 2.15 (tests/edit/interactive_prompts_test.cpp). Plain functions.
#pragma once

#include "edit/interactive/session_state.h"

#include <cstdint>

namespace voxseg::edit::interactive {

// Sum of `values` (a volume of `shape`, (z, y, x), x fastest) over `box`, as torch sums a float32
// view of that box with `threads` threads.
float torchSum(const float* values, Index3 shape, const Box& box, int threads,
               int vector_width = 8);

// torch's x.std() (unbiased) of the same view, given its float32 mean: std_var_all_cpu sums
// (double(v) - mean)^2 in double per thread chunk, adds the chunks, divides by n - 1 and rounds
// the square root to float.
float torchStd(const float* values, Index3 shape, const Box& box, float mean, int threads);

}  // namespace voxseg::edit::interactive
