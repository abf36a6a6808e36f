#include "pipeline/prediction_export.h"

#include "engine/half_kernels.h"
#include "pipeline/crop.h"
#include "pipeline/orientation.h"
#include "pipeline/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <type_traits>

namespace voxseg::pipeline {

namespace {

// Source taps of one output index along one axis.
struct Tap {
    int64_t i0 = 0;
    int64_t i1 = 0;
    float w = 0.f;  // weight of i1
};

std::vector<Tap> axisTaps(int64_t out_size, int64_t in_size, bool nearest) {
    std::vector<Tap> taps(static_cast<size_t>(out_size));
    const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
    for (int64_t o = 0; o < out_size; ++o) {
        Tap& t = taps[static_cast<size_t>(o)];
        if (in_size == out_size) {
            t.i0 = t.i1 = o;
            continue;
        }
        const double p = std::clamp((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0,
                                    static_cast<double>(in_size - 1));
        if (nearest) {
            t.i0 = t.i1 = std::clamp<int64_t>(std::llround(p), 0, in_size - 1);
            continue;
        }
        t.i0 = static_cast<int64_t>(std::floor(p));
        t.i1 = std::min(t.i0 + 1, in_size - 1);
        t.w = static_cast<float>(p - static_cast<double>(t.i0));
    }
    return taps;
}

Status checkScores(const engine::Tensor& scores, const PreprocessRecord& record) {
    const auto dims = tensorDims(record.network, record.axis_order);
    if (scores.dtype() != engine::DType::kFloat32 && scores.dtype() != engine::DType::kFloat16)
        return invalidArgument(std::string("network scores must be float32 or float16, got ") +
                               engine::dtypeName(scores.dtype()));
    if (scores.rank() != 4 || scores.dim(1) != dims[0] || scores.dim(2) != dims[1] ||
        scores.dim(3) != dims[2] || scores.dim(0) < 1)
        return invalidArgument("network output " + engine::shapeToString(scores.shape()) +
                               " does not match the network grid [K, " + std::to_string(dims[0]) +
                               ", " + std::to_string(dims[1]) + ", " + std::to_string(dims[2]) +
                               "]");
    return Status::ok();
}

// Calls visit(i, j, k, values) for every voxel of record.cropped, with the K interpolated scores.
// T: float (float32 scores) or uint16_t (float16 scores, read through half::toFloatTable()).
template <typename T, typename Visit>
void interpolateScores(const engine::Tensor& scores, const PreprocessRecord& record, int threads,
                       const Visit& visit) {
    const Geometry& in = record.network;
    const Geometry& out = record.cropped;
    const int separate = separateAxis(in.spacing, out.spacing);
    std::array<std::vector<Tap>, 3> taps;
    for (int a = 0; a < 3; ++a) taps[a] = axisTaps(out.size[a], in.size[a], a == separate);
    // Tensor strides of the network grid's index axes.
    std::array<int64_t, 3> stride{};
    if (record.axis_order == AxisOrder::kZyx)
        stride = {1, in.size[0], in.size[0] * in.size[1]};
    else
        stride = {in.size[1] * in.size[2], in.size[2], 1};
    const int64_t channels = scores.dim(0);
    const int64_t channel_stride = in.voxelCount();
    const T* base = scores.data<T>();
    [[maybe_unused]] const float* table = engine::half::toFloatTable();
    auto get = [&](const T* p, int64_t offset) -> float {
        if constexpr (std::is_same_v<T, float>)
            return p[offset];
        else
            return table[p[offset]];
    };

    auto worker = [&](int64_t k_begin, int64_t k_end) {
        std::vector<float> values(static_cast<size_t>(channels));
        for (int64_t k = k_begin; k < k_end; ++k) {
            const Tap& tk = taps[2][static_cast<size_t>(k)];
            for (int64_t j = 0; j < out.size[1]; ++j) {
                const Tap& tj = taps[1][static_cast<size_t>(j)];
                for (int64_t i = 0; i < out.size[0]; ++i) {
                    const Tap& ti = taps[0][static_cast<size_t>(i)];
                    const int64_t o000 = ti.i0 * stride[0] + tj.i0 * stride[1] + tk.i0 * stride[2];
                    const int64_t di = (ti.i1 - ti.i0) * stride[0];
                    const int64_t dj = (tj.i1 - tj.i0) * stride[1];
                    const int64_t dk = (tk.i1 - tk.i0) * stride[2];
                    const float wi = ti.w, wj = tj.w, wk = tk.w;
                    for (int64_t c = 0; c < channels; ++c) {
                        const T* p = base + c * channel_stride + o000;
                        const float p0 = get(p, 0), pj = get(p, dj), pk = get(p, dk),
                                    pjk = get(p, dk + dj);
                        const float c00 = p0 + wi * (get(p, di) - p0);
                        const float c10 = pj + wi * (get(p, dj + di) - pj);
                        const float c01 = pk + wi * (get(p, dk + di) - pk);
                        const float c11 = pjk + wi * (get(p, dk + dj + di) - pjk);
                        const float c0 = c00 + wj * (c10 - c00);
                        const float c1 = c01 + wj * (c11 - c01);
                        values[static_cast<size_t>(c)] = c0 + wk * (c1 - c0);
                    }
                    visit(i, j, k, values);
                }
            }
        }
    };
    int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
    n = std::clamp<int>(n, 1, static_cast<int>(std::max<int64_t>(1, out.size[2])));
    if (n == 1) {
        worker(0, out.size[2]);
        return;
    }
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t)
        pool.emplace_back(worker, out.size[2] * t / n, out.size[2] * (t + 1) / n);
    for (auto& th : pool) th.join();
}

// Cropped, oriented volume -> original grid. Takes the volume by value and drops each copy as soon
// as the next exists, so at most two label maps are alive (one when nothing was cropped and the
// orientation is the input's).
Result<Volume> backToOriginal(Volume cropped, const PreprocessRecord& record,
                              double outside_value) {
    Volume oriented;
    if (record.crop.covers(record.oriented)) {
        oriented = std::move(cropped);
    } else {
        VOXSEG_ASSIGN_OR_RETURN(oriented,
                                paste(cropped, record.oriented, record.crop, outside_value));
        cropped = Volume();
    }
    if (record.orientation.isIdentity()) {
        Volume::applyGeometry(record.original, *oriented.base());
        return oriented;
    }
    Volume out = applyAxisMapping(oriented, record.orientation.inverse());
    // The inverse mapping is exact; set the input geometry bit for bit.
    Volume::applyGeometry(record.original, *out.base());
    return out;
}

}  // namespace

Result<Volume> scoresToLabelMap(const engine::Tensor& scores, const PreprocessRecord& record,
                                const ExportSpec& spec, const Progress& progress) {
    VOXSEG_RETURN_IF_ERROR(checkScores(scores, record));
    const int64_t channels = scores.dim(0);
    std::vector<int> labels = spec.channel_labels;
    if (labels.empty()) {
        for (int64_t c = 0; c < channels; ++c)
            labels.push_back(
                static_cast<int>(spec.activation == OutputActivation::kSoftmax ? c : c + 1));
    }
    if (static_cast<int64_t>(labels.size()) != channels)
        return invalidArgument("the network gives " + std::to_string(channels) +
                               " output channels but the model lists " +
                               std::to_string(labels.size()) + " labels for them");
    const int max_label = *std::max_element(labels.begin(), labels.end());
    if (*std::min_element(labels.begin(), labels.end()) < 0 || max_label > 65535)
        return invalidArgument("label values must be in 0..65535");

    auto run = [&](auto tag) -> Result<Volume> {
        using T = decltype(tag);
        Volume cropped = Volume::allocate<T>(record.cropped);
        T* dst = cropped.data<T>();
        const int64_t ni = record.cropped.size[0], nj = record.cropped.size[1];
        const bool softmax = spec.activation == OutputActivation::kSoftmax;
        const float threshold = static_cast<float>(spec.threshold);
        auto visit = [&](int64_t i, int64_t j, int64_t k, const std::vector<float>& v) {
            size_t best = 0;
            for (size_t c = 1; c < v.size(); ++c)
                if (v[c] > v[best]) best = c;
            T label = static_cast<T>(labels[best]);
            if (!softmax && v[best] < threshold) label = 0;
            dst[(k * nj + j) * ni + i] = label;
        };
        if (scores.dtype() == engine::DType::kFloat16)
            interpolateScores<uint16_t>(scores, record, spec.threads, visit);
        else
            interpolateScores<float>(scores, record, spec.threads, visit);
        progress.report(0.9, "label map");
        return backToOriginal(std::move(cropped), record, 0.0);
    };
    Result<Volume> out = max_label <= 255 ? run(uint8_t{}) : run(uint16_t{});
    progress.report(1.0, "label map");
    return out;
}

Result<Volume> scoreChannelToOriginal(const engine::Tensor& scores, int64_t channel,
                                      const PreprocessRecord& record, double outside_value) {
    VOXSEG_RETURN_IF_ERROR(checkScores(scores, record));
    if (channel < 0 || channel >= scores.dim(0))
        return invalidArgument("score channel " + std::to_string(channel) + " out of range");
    // Interpolate a one-channel view of the tensor.
    const int64_t n = record.network.voxelCount();
    engine::Tensor one(engine::DType::kFloat32, {1, scores.dim(1), scores.dim(2), scores.dim(3)});
    if (scores.dtype() == engine::DType::kFloat16)
        engine::half::toFloatRow(scores.data<uint16_t>() + channel * n, one.data<float>(), n);
    else
        std::memcpy(one.data<float>(), scores.data<float>() + channel * n, sizeof(float) * n);
    Volume cropped = Volume::allocate<float>(record.cropped);
    float* dst = cropped.data<float>();
    const int64_t ni = record.cropped.size[0], nj = record.cropped.size[1];
    interpolateScores<float>(one, record, 0,
                             [&](int64_t i, int64_t j, int64_t k, const std::vector<float>& v) {
                                 dst[(k * nj + j) * ni + i] = v[0];
                             });
    return backToOriginal(std::move(cropped), record, outside_value);
}

}  // namespace voxseg::pipeline
