#include "engine/inference/nnunet_label_sums.h"

#include "engine/inference/half_kernels.h"
#include "engine/inference/sliding_window_nnunet.h"

#include <algorithm>
#include <new>
#include <string>

namespace voxseg::engine {

namespace {

Status outOfMemory() {
    return Status(StatusCode::kOutOfMemory,
                  "cannot allocate a plane of the float16 sliding-window sums");
}

}  // namespace

NnUNetLabelSums::NnUNetLabelSums(const WindowGrid& grid, int64_t classes,
                                 const std::vector<uint16_t>& map, std::span<const int> values,
                                 std::span<int16_t> labels)
    : grid_(grid), classes_(classes), map_(map), values_(values), labels_(labels) {
    const auto& padded = grid.padded;
    const auto& patch = grid.patch;
    axis_ = grid.starts[0].size() == 1 && grid.starts[1].size() > 1 ? 1 : 0;
    rows_ = padded[axis_ == 0 ? 1 : 0];
    planes_.resize(static_cast<size_t>(padded[static_cast<size_t>(axis_)]));
    // n_predictions, summed window after window as nnunetAccumulate sums it.
    weight_sum_.assign(static_cast<size_t>(padded[0] * padded[1] * padded[2]), 0);
    for (int64_t w = 0; w < grid.num_windows; ++w) {
        const auto o = gridOrigin(grid, w);
        for (int64_t z = 0; z < patch[0]; ++z)
            for (int64_t y = 0; y < patch[1]; ++y)
                nnunet_fp16::addWeightsRow(
                    weight_sum_.data() + ((o[0] + z) * padded[1] + (o[1] + y)) * padded[2] + o[2],
                    map.data() + (z * patch[1] + y) * patch[2], patch[2]);
    }
    const auto width = static_cast<size_t>(grid.dims[2]);
    best_.resize(width);
    widened_.resize(width);
    index_.resize(width);
}

uint16_t* NnUNetLabelSums::plane(int64_t index) {
    std::vector<uint16_t>& p = planes_[static_cast<size_t>(index)];
    if (p.empty()) {
        try {
            p.assign(static_cast<size_t>(classes_ * rows_ * grid_.padded[2]), 0);
        } catch (const std::bad_alloc&) {
            return nullptr;
        }
        held_bytes_ += p.size() * sizeof(uint16_t);
        peak_bytes_ = std::max(peak_bytes_, held_bytes_);
    }
    return p.data();
}

Status NnUNetLabelSums::add(int64_t window, const float* prediction) {
    const auto& padded = grid_.padded;
    const auto& patch = grid_.patch;
    const auto o = gridOrigin(grid_, window);
    VOXSEG_RETURN_IF_ERROR(finalizeBefore(o[static_cast<size_t>(axis_)]));
    const int64_t pw = patch[2];
    const int64_t patch_voxels = patch[0] * patch[1] * pw;
    for (int64_t z = 0; z < patch[0]; ++z)
        for (int64_t y = 0; y < patch[1]; ++y) {
            const int64_t at = axis_ == 0 ? o[0] + z : o[1] + y;
            const int64_t row = axis_ == 0 ? o[1] + y : o[0] + z;
            uint16_t* p = plane(at);
            if (p == nullptr) return outOfMemory();
            const int64_t in_patch = (z * patch[1] + y) * pw;
            for (int64_t k = 0; k < classes_; ++k)
                nnunet_fp16::addPredictionRow(p + (k * rows_ + row) * padded[2] + o[2],
                                              prediction + k * patch_voxels + in_patch,
                                              map_.data() + in_patch, pw);
        }
    return Status::ok();
}

Status NnUNetLabelSums::finish() {
    return finalizeBefore(grid_.padded[static_cast<size_t>(axis_)]);
}

Status NnUNetLabelSums::finalizeBefore(int64_t end) {
    for (; next_final_ < end; ++next_final_) VOXSEG_RETURN_IF_ERROR(finalize(next_final_));
    return Status::ok();
}

Status NnUNetLabelSums::finalize(int64_t index) {
    const auto& padded = grid_.padded;
    const auto& dims = grid_.dims;
    const auto& pad = grid_.pad_before;
    const auto a = static_cast<size_t>(axis_);
    const size_t other = axis_ == 0 ? 1 : 0;
    uint16_t* p = plane(index);
    if (p == nullptr) return outOfMemory();
    // predicted_logits /= n_predictions, over the padded rows as the whole-volume sums are.
    bool finite = true;
    for (int64_t k = 0; k < classes_; ++k)
        for (int64_t r = 0; r < rows_; ++r) {
            const int64_t z = axis_ == 0 ? index : r, y = axis_ == 0 ? r : index;
            finite = nnunet_fp16::divideRow(p + (k * rows_ + r) * padded[2],
                                            weight_sum_.data() + (z * padded[1] + y) * padded[2],
                                            padded[2]) &&
                     finite;
        }
    if (!finite)
        return invalidArgument(
            "the float16 sliding-window sums overflowed (nnU-Net: \"Encountered inf in predicted "
            "array\"): the network's outputs exceed float16's range; use \"accumulate\": "
            "\"normalized\" in model.json");
    const int64_t i = index - pad[a];
    if (i >= 0 && i < dims[a]) {
        const int64_t width = dims[2];
        auto channel = [&](int64_t k, int64_t r) {
            half::toFloatRow(p + (k * rows_ + r) * padded[2] + pad[2], widened_.data(), width);
            return widened_.data();
        };
        for (int64_t j = 0; j < dims[other]; ++j) {
            const int64_t r = j + pad[other];
            const float* s0 = channel(0, r);
            std::copy(s0, s0 + width, best_.begin());
            std::fill(index_.begin(), index_.end(), 0);
            for (int64_t k = 1; k < classes_; ++k) {  // argmaxLabels' loop: first largest wins
                const float* sk = channel(k, r);
                for (int64_t x = 0; x < width; ++x) {
                    const bool greater = sk[x] > best_[static_cast<size_t>(x)];
                    best_[static_cast<size_t>(x)] = greater ? sk[x] : best_[static_cast<size_t>(x)];
                    index_[static_cast<size_t>(x)] =
                        greater ? static_cast<int32_t>(k) : index_[static_cast<size_t>(x)];
                }
            }
            const int64_t z = axis_ == 0 ? i : j, y = axis_ == 0 ? j : i;
            int16_t* out = labels_.data() + (z * dims[1] + y) * width;
            for (int64_t x = 0; x < width; ++x) {
                const int32_t k = index_[static_cast<size_t>(x)];
                out[x] =
                    static_cast<int16_t>(values_.empty() ? k : values_[static_cast<size_t>(k)]);
            }
        }
    }
    std::vector<uint16_t>& held = planes_[static_cast<size_t>(index)];
    held_bytes_ -= held.size() * sizeof(uint16_t);
    std::vector<uint16_t>().swap(held);
    return Status::ok();
}

}  // namespace voxseg::engine
