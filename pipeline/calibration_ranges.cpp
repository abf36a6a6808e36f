// INT8 calibration ranges (calibration_ranges.h): the running-range histogram and the three ways
// of choosing a range from it.
#include "pipeline/calibration_ranges.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace voxseg::pipeline {

using engine::RangeMethod;
using engine::quant::ActivationQuant;

void ActivationHistogram::grow(double needed) {
    if (half_range_ == 0.0) {
        half_range_ = needed;
        return;
    }
    while (half_range_ < needed) {  // double R: bin i of the new layout = bins 2i, 2i+1 of the old
        for (std::vector<int64_t>* side : {&pos_, &neg_}) {
            std::vector<int64_t>& b = *side;
            for (int i = 0; i < kBinsPerSide / 2; ++i) b[i] = b[2 * i] + b[2 * i + 1];
            std::fill(b.begin() + kBinsPerSide / 2, b.end(), 0);
        }
        half_range_ *= 2.0;
    }
}

void ActivationHistogram::add(const float* data, size_t n) {
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    int64_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        const float x = data[i];
        if (!std::isfinite(x)) {
            ++bad;
            continue;
        }
        lo = std::min(lo, x);
        hi = std::max(hi, x);
    }
    non_finite_ += bad;
    const int64_t finite = static_cast<int64_t>(n) - bad;
    if (finite == 0) return;
    min_ = count_ == 0 ? lo : std::min(min_, lo);
    max_ = count_ == 0 ? hi : std::max(max_, hi);
    count_ += finite;
    const double amax =
        std::max(std::fabs(static_cast<double>(lo)), std::fabs(static_cast<double>(hi)));
    if (amax > half_range_) grow(amax);
    if (half_range_ == 0.0) {  // every value so far is 0
        zeros_ += finite;
        return;
    }
    const double inv = kBinsPerSide / half_range_;
    const int64_t last = kBinsPerSide - 1;
    for (size_t i = 0; i < n; ++i) {
        const float x = data[i];
        if (!std::isfinite(x)) continue;
        if (x == 0.0f)
            ++zeros_;
        else if (x > 0.0f)
            ++pos_[std::min(static_cast<int64_t>(x * inv), last)];
        else
            ++neg_[std::min(static_cast<int64_t>(-x * inv), last)];
    }
}

std::vector<ActivationHistogram::Bin> ActivationHistogram::bins() const {
    std::vector<Bin> out;
    const double w = binWidth();
    for (int i = kBinsPerSide - 1; i >= 0; --i)
        if (neg_[i]) out.push_back({-(i + 0.5) * w, neg_[i]});
    if (zeros_) out.push_back({0.0, zeros_});
    for (int i = 0; i < kBinsPerSide; ++i)
        if (pos_[i]) out.push_back({(i + 0.5) * w, pos_[i]});
    return out;
}

double ActivationHistogram::quantile(double q) const {
    if (count_ == 0) return 0.0;
    const double target = std::clamp(q, 0.0, 1.0) * static_cast<double>(count_);
    const double w = binWidth();
    double seen = 0.0;
    auto inside = [&](double lower_edge, int64_t c) {  // the value `target` reaches in this bin
        return lower_edge + w * (target - seen) / static_cast<double>(c);
    };
    double value = max_;
    bool found = false;
    for (int i = kBinsPerSide - 1; i >= 0 && !found; --i) {
        if (!neg_[i]) continue;
        if (seen + neg_[i] >= target) {
            value = inside(-(i + 1) * w, neg_[i]);
            found = true;
        }
        seen += neg_[i];
    }
    if (!found && zeros_) {
        if (seen + zeros_ >= target) {
            value = 0.0;
            found = true;
        }
        seen += zeros_;
    }
    for (int i = 0; i < kBinsPerSide && !found; ++i) {
        if (!pos_[i]) continue;
        if (seen + pos_[i] >= target) {
            value = inside(i * w, pos_[i]);
            found = true;
        }
        seen += pos_[i];
    }
    return std::clamp(value, static_cast<double>(min_), static_cast<double>(max_));
}

double expectedQuantizationError(const ActivationHistogram& h, const ActivationQuant& q) {
    if (h.count() == 0) return 0.0;
    const double lo = (0.0 - q.zero_point) * static_cast<double>(q.scale);
    const double hi = (255.0 - q.zero_point) * static_cast<double>(q.scale);
    const double rounding = static_cast<double>(q.scale) * q.scale / 12.0;
    double sum = 0.0;
    for (const auto& b : h.bins()) {
        const double c = b.centre;
        const double e = c < lo ? (c - lo) * (c - lo) : c > hi ? (c - hi) * (c - hi) : rounding;
        sum += e * static_cast<double>(b.count);
    }
    return sum / static_cast<double>(h.count());
}

namespace {

// Shrinks [lo, hi] by a common factor t in (0, 1] (kSteps steps) and keeps the least error.
Result<ActivationRange> mseRange(const ActivationHistogram& h, float lo, float hi,
                                 const std::string& tensor, engine::quant::ZeroPoints zero_points) {
    constexpr int kSteps = 256;
    ActivationRange best{lo, hi};
    double best_error = std::numeric_limits<double>::infinity();
    for (int k = kSteps; k >= 1; --k) {
        const double t = static_cast<double>(k) / kSteps;
        const ActivationRange r{static_cast<float>(lo * t), static_cast<float>(hi * t)};
        auto q = engine::quant::activationQuantFromRange(r.lo, r.hi, tensor, zero_points);
        if (!q.isOk()) continue;
        const double e = expectedQuantizationError(h, *q);
        if (e < best_error) {
            best_error = e;
            best = r;
        }
    }
    return best;
}

}  // namespace

Result<ActivationRange> chooseActivationRange(const ActivationHistogram& h, RangeMethod method,
                                              double percentile, const std::string& tensor,
                                              engine::quant::ZeroPoints zero_points) {
    if (h.nonFinite() > 0)
        return invalidArgument("int8 calibration: tensor '" + tensor + "' took " +
                                   std::to_string(h.nonFinite()) +
                                   " non-finite values (NaN or infinity) in the fp32 network: "
                                   "check the model and the cases before calibrating it",
                               tensor);
    if (h.count() == 0 || !(h.max() > h.min()) || (h.min() >= 0.0f && !(h.max() > 0.0f)))
        return invalidArgument("int8 calibration: tensor '" + tensor +
                                   "' took a single value on every calibration case; calibrate "
                                   "with cases that exercise it",
                               tensor);
    const bool non_negative = h.min() >= 0.0f;
    const float lo = non_negative ? 0.0f : h.min();
    switch (method) {
        case RangeMethod::kMinMax:
            return ActivationRange{h.min(), h.max()};
        case RangeMethod::kMse:
            return mseRange(h, lo, h.max(), tensor, zero_points);
        case RangeMethod::kPercentile: {
            if (!(percentile > 50.0 && percentile <= 100.0))
                return invalidArgument("int8 calibration: percentile " +
                                           std::to_string(percentile) + " is not in (50, 100]",
                                       tensor);
            const double p = percentile / 100.0;
            ActivationRange r{lo, static_cast<float>(h.quantile(p))};
            if (!non_negative) r.lo = static_cast<float>(std::min(h.quantile(1.0 - p), 0.0));
            if (!(r.hi > r.lo)) return ActivationRange{h.min(), h.max()};
            return r;
        }
    }
    return ActivationRange{h.min(), h.max()};
}

void ChannelMagnitudes::add(const float* data, const std::vector<int64_t>& shape,
                            const std::vector<float>& centre) {
    const int64_t batch = shape.at(0), channels = shape.at(1);
    int64_t inner = 1;
    for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
    if (channels_.empty()) channels_.resize(static_cast<size_t>(channels));
    buffer_.resize(static_cast<size_t>(inner));
    for (int64_t n = 0; n < batch; ++n)
        for (int64_t c = 0; c < channels; ++c) {
            const float* x = data + (n * channels + c) * inner;
            const float m = centre.empty() ? 0.0f : centre[static_cast<size_t>(c)];
            for (int64_t i = 0; i < inner; ++i) buffer_[i] = std::fabs(x[i] - m);
            channels_[static_cast<size_t>(c)].add(buffer_.data(), buffer_.size());
        }
}

namespace {

// The magnitude whose symmetric 8-bit steps (hi / 127) and clipping above hi give the least
// expected squared error over `h` (magnitudes), among kSteps shrinks of the largest.
double mseMagnitude(const ActivationHistogram& h) {
    constexpr int kSteps = 256;
    const auto bins = h.bins();
    double best = h.max(), best_error = std::numeric_limits<double>::infinity();
    for (int k = kSteps; k >= 1; --k) {
        const double hi = h.max() * static_cast<double>(k) / kSteps;
        const double step = hi / 127.0;
        double e = 0.0;
        for (const auto& b : bins)
            e += static_cast<double>(b.count) *
                 (b.centre > hi ? (b.centre - hi) * (b.centre - hi) : step * step / 12.0);
        if (e < best_error) {
            best_error = e;
            best = hi;
        }
    }
    return best;
}

}  // namespace

Result<std::vector<float>> calibrateChannelScales(const ChannelMagnitudes& m, RangeMethod method,
                                                  double percentile, const std::string& tensor) {
    std::vector<float> scales;
    for (size_t c = 0; c < m.channels().size(); ++c) {
        const ActivationHistogram& h = m.channels()[c];
        if (h.nonFinite() > 0)
            return invalidArgument("int8 calibration: normalisation input '" + tensor +
                                       "' channel " + std::to_string(c) +
                                       " took non-finite values in the fp32 network: check the "
                                       "model and the cases before calibrating it",
                                   tensor);
        double hi = h.max();
        if (method == RangeMethod::kPercentile && h.max() > 0.0f)
            hi = std::max(h.quantile(percentile / 100.0), h.max() / 127.0);
        else if (method == RangeMethod::kMse && h.max() > 0.0f)
            hi = mseMagnitude(h);
        scales.push_back(hi > 0.0 ? static_cast<float>(hi / 127.0) : 1.0f);
    }
    if (scales.empty())
        return invalidArgument(
            "int8 calibration: normalisation input '" + tensor + "' was never observed", tensor);
    return scales;
}

Result<ActivationQuant> calibrateActivation(const ActivationHistogram& h, RangeMethod method,
                                            double percentile, const std::string& tensor,
                                            engine::quant::ZeroPoints zero_points) {
    VOXSEG_ASSIGN_OR_RETURN(const ActivationRange r,
                            chooseActivationRange(h, method, percentile, tensor, zero_points));
    return engine::quant::activationQuantFromRange(r.lo, r.hi, tensor, zero_points);
}

}  // namespace voxseg::pipeline
