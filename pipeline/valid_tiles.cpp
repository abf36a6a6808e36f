#include "pipeline/valid_tiles.h"

#include "core/clock.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace voxseg::pipeline {

using engine::Shape;
using engine::Tensor;

std::vector<int64_t> validTileStarts(int64_t image, int64_t output) {
    std::vector<int64_t> starts;
    if (image <= 0 || output <= 0) return starts;
    const int64_t s = std::min(image, output);
    for (int64_t x = 0; x < image; x += s) starts.push_back(x);
    if (image % s != 0) starts.push_back(image - s);
    return starts;
}

Result<std::unique_ptr<ValidTiles>> ValidTiles::create(engine::Backend& backend,
                                                       const engine::Graph& graph, int64_t channels,
                                                       const std::vector<int64_t>& patch,
                                                       const std::vector<int64_t>& output,
                                                       const engine::CompileOptions& compile) {
    if (patch.size() != 3 || output.size() != 3)
        return invalidArgument("valid tiling needs a 3-D patch and output size");
    for (size_t a = 0; a < 3; ++a)
        if (output[a] < 1 || patch[a] < output[a] || (patch[a] - output[a]) % 2 != 0)
            return invalidArgument("valid tiling: output " + engine::shapeToString(output) +
                                   " is not the centred part of the patch " +
                                   engine::shapeToString(patch));
    if (graph.inputs.size() != 1) return unsupported("valid tiling needs a network with one input");
    Shape input = {1, channels, patch[0], patch[1], patch[2]};
    auto compiled = backend.compile(graph, {input}, compile);
    if (!compiled.isOk())
        return compiled.status().withContext("compiling the network for input " +
                                             engine::shapeToString(input) + ": ");
    std::unique_ptr<ValidTiles> t(new ValidTiles());
    t->network_ = std::move(compiled).value();
    const auto& outs = t->network_->outputShapes();
    if (outs.empty() || outs[0].size() != 5 || outs[0][0] != 1 ||
        !std::equal(output.begin(), output.end(), outs[0].begin() + 2))
        return invalidArgument(
            "valid tiling: the network's output " +
            (outs.empty() ? std::string("(none)") : engine::shapeToString(outs[0])) +
            " for input " + engine::shapeToString(input) + " is not [1, K, " +
            engine::shapeToString(output) + "...]");
    for (size_t a = 0; a < 3; ++a) {
        t->patch_[a] = patch[a];
        t->output_[a] = output[a];
    }
    t->channels_ = channels;
    t->num_classes_ = outs[0][1];
    return t;
}

std::string ValidTiles::describe() const {
    return "valid tiles (DeepVoxNet): input " + std::to_string(patch_[0]) + "x" +
           std::to_string(patch_[1]) + "x" + std::to_string(patch_[2]) + ", output " +
           std::to_string(output_[0]) + "x" + std::to_string(output_[1]) + "x" +
           std::to_string(output_[2]);
}

Result<Tensor> ValidTiles::run(const Tensor& image, const Progress& progress,
                               engine::SlidingWindowStats* stats) {
    const auto t0 = std::chrono::steady_clock::now();
    if (image.dtype() != engine::DType::kFloat32 || image.shape().size() != 4 ||
        image.dim(0) != channels_)
        return invalidArgument("valid tiling: expected a float32 [" + std::to_string(channels_) +
                               ", D0, D1, D2] image, got " + engine::shapeToString(image.shape()));
    const std::array<int64_t, 3> dims{image.dim(1), image.dim(2), image.dim(3)};
    std::array<std::vector<int64_t>, 3> starts;
    for (size_t a = 0; a < 3; ++a) starts[a] = validTileStarts(dims[a], output_[a]);
    const int64_t plane = dims[1] * dims[2], vox = dims[0] * plane;
    Tensor result(engine::DType::kFloat32, {num_classes_, dims[0], dims[1], dims[2]});
    std::fill(result.data<float>(), result.data<float>() + result.numel(), 0.0f);
    Tensor in(engine::DType::kFloat32, {1, channels_, patch_[0], patch_[1], patch_[2]});
    std::vector<Tensor> outs;
    const size_t total = starts[0].size() * starts[1].size() * starts[2].size();
    size_t done = 0;
    double network_seconds = 0.0;
    const float* src = image.data<float>();
    const int64_t pplane = patch_[1] * patch_[2], pvox = patch_[0] * pplane;
    const int64_t oplane = output_[1] * output_[2], ovox = output_[0] * oplane;
    for (int64_t x : starts[0])
        for (int64_t y : starts[1])
            for (int64_t z : starts[2]) {
                VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
                const std::array<int64_t, 3> start{x, y, z};
                std::array<int64_t, 3> in0{}, out0{};  // image index of patch / output voxel 0
                for (size_t a = 0; a < 3; ++a) {
                    const int64_t c = start[a] + std::min(dims[a], output_[a]) / 2;
                    in0[a] = c - patch_[a] / 2;
                    out0[a] = in0[a] + (patch_[a] - output_[a]) / 2;
                }
                float* dst = in.data<float>();
                std::fill(dst, dst + in.numel(), 0.0f);  // ExtractSegment3D2: 0 outside
                for (int64_t ch = 0; ch < channels_; ++ch)
                    for (int64_t i = 0; i < patch_[0]; ++i) {
                        const int64_t ii = in0[0] + i;
                        if (ii < 0 || ii >= dims[0]) continue;
                        for (int64_t j = 0; j < patch_[1]; ++j) {
                            const int64_t jj = in0[1] + j;
                            if (jj < 0 || jj >= dims[1]) continue;
                            const int64_t k0 = std::max<int64_t>(0, -in0[2]);
                            const int64_t k1 = std::min(patch_[2], dims[2] - in0[2]);
                            if (k1 <= k0) continue;
                            std::memcpy(dst + ch * pvox + i * pplane + j * patch_[2] + k0,
                                        src + ch * vox + ii * plane + jj * dims[2] + in0[2] + k0,
                                        sizeof(float) * static_cast<size_t>(k1 - k0));
                        }
                    }
                const auto n0 = std::chrono::steady_clock::now();
                VOXSEG_RETURN_IF_ERROR(network_->run({in}, outs));
                network_seconds += secondsSince(n0);
                const float* o = outs.at(0).data<float>();
                float* r = result.data<float>();
                for (int64_t ch = 0; ch < num_classes_; ++ch)
                    for (int64_t i = 0; i < output_[0]; ++i) {
                        const int64_t ii = out0[0] + i;
                        if (ii < 0 || ii >= dims[0]) continue;
                        for (int64_t j = 0; j < output_[1]; ++j) {
                            const int64_t jj = out0[1] + j;
                            if (jj < 0 || jj >= dims[1]) continue;
                            const int64_t k0 = std::max<int64_t>(0, -out0[2]);
                            const int64_t k1 = std::min(output_[2], dims[2] - out0[2]);
                            if (k1 <= k0) continue;
                            std::memcpy(r + ch * vox + ii * plane + jj * dims[2] + out0[2] + k0,
                                        o + ch * ovox + i * oplane + j * output_[2] + k0,
                                        sizeof(float) * static_cast<size_t>(k1 - k0));
                        }
                    }
                progress.report(++done, total, "lesion tiles");
            }
    if (stats) {
        stats->patches = static_cast<int64_t>(total);
        stats->forward_passes = static_cast<int64_t>(total);
        stats->seconds = secondsSince(t0);
        stats->network_seconds = network_seconds;
        stats->accumulator_bytes = result.bytes();
        stats->patch_buffer_bytes = in.bytes() + (outs.empty() ? 0 : outs[0].bytes());
        stats->workspace_bytes = network_->workspaceBytes();
        stats->grid = {static_cast<int64_t>(starts[0].size()),
                       static_cast<int64_t>(starts[1].size()),
                       static_cast<int64_t>(starts[2].size())};
    }
    return result;
}

}  // namespace voxseg::pipeline
