#include "cuda/cuda_backend.h"

#include "cuda/cuda_errors.h"
#include "cuda/cuda_graph.h"
#include "cuda/cuda_sliding_window.h"
#include "engine/inference/sliding_window.h"

#include <fmt/format.h>

namespace voxseg::cuda {
namespace {

class CudaBackend final : public engine::Backend {
  public:
    CudaBackend(int device, int capability, std::string description)
        : device_(device), capability_(capability), description_(std::move(description)) {}

    std::string name() const override { return "cuda"; }
    std::string deviceDescription() const override { return description_; }

    bool supportsPrecision(engine::Precision precision) const override {
        switch (precision) {
            case engine::Precision::kFloat32:
                return true;
            case engine::Precision::kFloat16:
                return capability_ >= 70;
            case engine::Precision::kBFloat16:
                return capability_ >= 80;
            case engine::Precision::kInt8:  // cuBLASLt's int8 tensor cores (int8_conv.h)
                return capability_ >= 75;
            case engine::Precision::kFp8:  // its e4m3 tensor cores: Ada and Hopper
                return capability_ >= 89;
            case engine::Precision::kAuto:
                return false;
        }
        return false;
    }

    engine::PrecisionChoice autoPrecision() const override {
        engine::PrecisionChoice choice = cudaAutoPrecision(capability_);
        choice.reason = description_ + ": " + choice.reason;
        return choice;
    }

    // "auto" never picks int8 on GPUs: a package's int8 validation ran the cpu backend's plan, and
    // the GPU's int8 results have not been measured against it (docs/int8-gpu.md).
    Status supportsInt8Weights(int) const override {
        return unsupported(
            "cuda backend: auto does not pick int8 on GPUs (the package's int8 validation ran on "
            "the cpu backend); ask for --precision int8 to run it",
            "cuda");
    }

    Status supportsNode(const engine::Graph& graph, const engine::Node& node) const override {
        return cudaSupportsNode(graph, node);
    }

    Result<std::unique_ptr<engine::VolumeInference>> makeSlidingWindow(
        const std::vector<const engine::Graph*>& graphs, int64_t channels,
        const engine::SlidingWindowOptions& options) override {
        VOXSEG_RETURN_IF_ERROR(refuseUnsupported(options.compile));
        if (!supportsPrecision(options.compile.precision))
            return unsupported(fmt::format(
                "{} needs a newer GPU than {} (sm_{}): use --precision fp32",
                engine::precisionName(options.compile.precision), description_, capability_));
        engine::SlidingWindowOptions on_device = options;
        on_device.compile.device_index = device_;
        return makeCudaVolumeInference(graphs, channels, on_device);
    }

    Result<std::unique_ptr<engine::CompiledGraph>> compile(
        const engine::Graph& graph, const std::vector<engine::Shape>& input_shapes,
        const engine::CompileOptions& options) override {
        if (options.precision == engine::Precision::kAuto)
            return invalidArgument(
                "cuda backend: precision auto must be resolved first (engine::choosePrecision)");
        VOXSEG_RETURN_IF_ERROR(refuseUnsupported(options));
        if (!supportsPrecision(options.precision))
            return unsupported(
                fmt::format("{} needs a newer GPU than {} (sm_{}): use --precision fp32",
                            engine::precisionName(options.precision), description_, capability_));
        engine::CompileOptions opts = options;
        opts.device_index = device_;
        auto compiled = CudaCompiledGraph::compile(graph, input_shapes, opts, cache_);
        if (!compiled.isOk()) return compiled.status();
        return std::unique_ptr<engine::CompiledGraph>(std::move(compiled).value());
    }

  private:
    // What the cuda backend does not run, with the reason.
    static Status refuseUnsupported(const engine::CompileOptions& options) {
        if (options.observer.active())
            return unsupported(
                "cuda backend: activation observers are a cpu backend feature "
                "(engine/activation_observer.h); calibrate on the cpu backend",
                "cuda");
        return Status::ok();
    }

    int device_;
    int capability_;
    std::string description_;
    AlgoCache cache_;
};

}  // namespace

Result<std::unique_ptr<engine::Backend>> makeCudaBackend(int device) {
    VOXSEG_ASSIGN_OR_RETURN(int count, usableDeviceCount());
    if (device < 0 || device >= count)
        return Status(StatusCode::kNotFound,
                      fmt::format("CUDA device {} does not exist ({} device{} found)", device,
                                  count, count == 1 ? "" : "s"),
                      "cuda");
    VOXSEG_CUDA_CHECK(cudaSetDevice(device));
    // Touch the context now so that a broken driver fails here, not in the middle of a run.
    VOXSEG_CUDA_CHECK(cudaFree(nullptr));
    VOXSEG_ASSIGN_OR_RETURN(int capability, computeCapability(device));
    VOXSEG_ASSIGN_OR_RETURN(std::string description, describeDevice(device));
    if (cudnnGetVersion() < 90000)
        return Status(StatusCode::kDeviceError,
                      fmt::format("cuDNN {} is too old: voxseg needs cuDNN 9", cudnnGetVersion()),
                      "cudnn");
    return std::unique_ptr<engine::Backend>(
        new CudaBackend(device, capability, std::move(description)));
}

engine::PrecisionChoice cudaAutoPrecision(int capability) {
    const std::string sm = fmt::format("sm_{}", capability);
    if (capability >= 80)
        return {engine::Precision::kBFloat16,
                sm + " has bf16 tensor cores (float32 accumulation; fp32's range)"};
    if (capability >= 70)
        return {engine::Precision::kFloat16, sm + " has fp16 tensor cores but no bf16"};
    return {engine::Precision::kFloat32, sm + " has no tensor cores"};
}

}  // namespace voxseg::cuda
