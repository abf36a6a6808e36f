// nnU-Net 2.x's sliding-window arithmetic, rounding for rounding (Accumulation::kNnUNetFp16 in
// engine/inference/sliding_window.h): nnunetv2 2.5.1 inference/sliding_window_prediction.py
// compute_gaussian and predict_from_raw_data.py _internal_predict_sliding_window_return_logits /
// predict_logits_from_preprocessed_data. PyTorch computes a float16 op in float32 and rounds the
// result to float16 (round to nearest even, overflow to inf); these row kernels do the same, so
// that every sum is nnU-Net's bit for bit: 8 values at a time with F16C where the CPU has it
// (sliding_window_nnunet_f16c.cpp), one scalar conversion per value elsewhere.
// Values are float16 bit patterns (engine/graph/tensor.h floatToHalf/halfToFloat).
#pragma once

#include <cstdint>
#include <vector>

namespace voxseg::engine::nnunet_fp16 {

// compute_gaussian(patch, sigma_scale, value_scaling_factor=10, dtype=float16): a delta at
// patch // 2 filtered by scipy's gaussian_filter (sigma = patch * sigma_scale, truncate 4, mode
// constant) axis after axis in float64, divided by max / 10, converted as torch converts float64
// to float16 (through float32), zeros replaced by the smallest non-zero value. Row-major over the
// patch axes. `gaussian` false: nnU-Net's constant weight 1.
std::vector<uint16_t> importanceMap(const std::vector<int64_t>& patch, double sigma_scale,
                                    bool gaussian = true);

// n[x] = half(float(n[x]) + float(g[x])): n_predictions[sl] += gaussian.
void addWeightsRow(uint16_t* n, const uint16_t* g, int64_t count);
// acc[x] = half(float(acc[x]) + p[x] * float(g[x])): prediction *= gaussian (float32), then
// predicted_logits[sl] += prediction.
void addPredictionRow(uint16_t* acc, const float* p, const uint16_t* g, int64_t count);
// acc[x] = half(float(acc[x]) / float(n[x])): predicted_logits /= n_predictions. Returns false
// when a result is infinite (nnU-Net raises "Encountered inf in predicted array").
bool divideRow(uint16_t* acc, const uint16_t* n, int64_t count);
// a[x] = half(float(a[x]) + float(b[x])): prediction += the next fold's logits.
void addRow(uint16_t* a, const uint16_t* b, int64_t count);
// a[x] = half(float(a[x]) / float(divisor)): prediction /= len(folds).
void divideRowBy(uint16_t* a, int64_t count, int divisor);

// float64 -> float16 rounded once (to nearest even), as numpy assigns float64 to a float16 array
// (nnU-Net's export resamples the float16 logits in float64 into a float16 array).
uint16_t doubleToHalf(double v);

}  // namespace voxseg::engine::nnunet_fp16
