// INT8 calibration ranges (issue 40, docs/int8.md "Calibration and accuracy"): the values one
// activation tensor took over every calibration patch, kept as a histogram, and the range
// [lo, hi] chosen from it that the tensor's u8 scale and zero point cover
// (engine::quant::activationQuantFromRange).
//
// One pass with a running range: fixed bins on each side of zero (kBinsPerSide) over (-R, R);
// when a value beyond R arrives, R doubles and adjacent bins merge pairwise, which loses no count
// and keeps every bin edge where it was. Two passes (min/max first, then a histogram) would run
// the fp32 network over every case twice, and a case costs a whole sliding window; the running
// range costs resolution only: the values always fill more than half the bins of their side, so
// a range is resolved to better than 1/1024 of itself.
//
// Methods: kMinMax takes the exact extremes; kPercentile takes the p-th percentile as the top
// and, for a tensor that went below 0, the (100-p)-th as the bottom (one wild voxel then widens
// no scale);
// kMse picks, among ranges shrunk from the extremes by a common factor, the one whose expected
// squared quantisation error (rounding inside the range, clipping outside) over the histogram is
// least. Plain values; not thread-safe (one histogram per tensor, filled by one thread).
#pragma once

#include "core/status.h"
#include "engine/model/model_quantization.h"
#include "engine/quant/int8_scheme.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace voxseg::pipeline {

class ActivationHistogram {
  public:
    static constexpr int kBinsPerSide = 2048;

    // Adds `n` values; NaN and infinities are counted apart (nonFinite) and nowhere else.
    void add(const float* data, size_t n);

    int64_t count() const { return count_; }  // finite values added
    int64_t nonFinite() const { return non_finite_; }
    float min() const { return min_; }  // exact extremes of the finite values (0 when none)
    float max() const { return max_; }
    // R: the bins cover (-R, R); 0 while every value was 0.
    double halfRange() const { return half_range_; }
    // The value below which a share `q` (in [0, 1]) of the values lie, linear inside a bin and
    // clamped to [min, max].
    double quantile(double q) const;

    // Every non-empty bin as (centre, count), most negative first (for the MSE search).
    struct Bin {
        double centre;
        int64_t count;
    };
    std::vector<Bin> bins() const;

  private:
    void grow(double needed);
    double binWidth() const { return half_range_ / kBinsPerSide; }

    std::vector<int64_t> pos_ = std::vector<int64_t>(kBinsPerSide);  // (i w, (i+1) w), 0 excluded
    std::vector<int64_t> neg_ = std::vector<int64_t>(kBinsPerSide);  // (-(i+1) w, -i w)
    // Exact zeros apart (a point, not spread over bin 0): a ReLU output is mostly 0, and its
    // percentiles must not be interpolated inside the first bin.
    int64_t zeros_ = 0;
    double half_range_ = 0.0;
    int64_t count_ = 0, non_finite_ = 0;
    float min_ = 0.0f, max_ = 0.0f;
};

struct ActivationRange {
    float lo = 0.0f, hi = 0.0f;
};

// The range `method` chooses for `tensor` (named in messages). kPercentile takes `percentile` in
// (50, 100]. A tensor that took non-finite values, or no range at all (every value equal), is
// kInvalidArgument naming it and what to do. A percentile range that collapses (a ReLU output
// zero in more than `percentile` % of its voxels) falls back to the extremes. kMse weighs its
// candidates with the u8 parameters `zero_points` gives them.
Result<ActivationRange> chooseActivationRange(
    const ActivationHistogram& h, engine::RangeMethod method, double percentile,
    const std::string& tensor,
    engine::quant::ZeroPoints zero_points = engine::quant::ZeroPoints::kAlways);

// chooseActivationRange, then the u8 scale and zero point of engine/quant/int8_scheme.h (zero
// point 0 for a tensor that never went below 0, or, with kWhereNeeded, only a little).
Result<engine::quant::ActivationQuant> calibrateActivation(
    const ActivationHistogram& h, engine::RangeMethod method, double percentile,
    const std::string& tensor,
    engine::quant::ZeroPoints zero_points = engine::quant::ZeroPoints::kAlways);

// 8-bit normalisation inputs (engine/quant/int8_scheme.h; calibrate --norm-inputs int8): per
// channel, a histogram of |x - centre[c]| over every calibration patch (centre: the Conv bias the
// s8 leaves out, or zeros).
class ChannelMagnitudes {
  public:
    // `data`: plain N C spatial... float32 of `shape`; `centre` empty or one value per channel.
    void add(const float* data, const std::vector<int64_t>& shape,
             const std::vector<float>& centre);
    const std::vector<ActivationHistogram>& channels() const { return channels_; }

  private:
    std::vector<ActivationHistogram> channels_;
    std::vector<float> buffer_;
};

// The s8 scale of each channel: the magnitude `method` chooses, / 127 (kMinMax: the largest;
// kPercentile: its percentile; kMse: the least expected squared error of symmetric 8-bit steps
// with clipping). A channel that was always at its centre gets scale 1 (every value is q = 0).
// Non-finite values: kInvalidArgument naming `tensor`.
Result<std::vector<float>> calibrateChannelScales(const ChannelMagnitudes& m,
                                                  engine::RangeMethod method, double percentile,
                                                  const std::string& tensor);

// The expected squared error of quantising the histogram's values with `q` (rounding error
// scale^2 / 12 per value inside the representable range, the squared distance to its edge for a
// value outside), per value. Exposed for the MSE search's tests.
double expectedQuantizationError(const ActivationHistogram& h,
                                 const engine::quant::ActivationQuant& q);

}  // namespace voxseg::pipeline
