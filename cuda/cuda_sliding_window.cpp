#include "cuda/cuda_sliding_window.h"

#include "core/log.h"
#include "cuda/cuda_errors.h"
#include "cuda/cuda_graph.h"
#include "cuda/device_memory.h"
#include "cuda/kernels.h"
#include "cuda/kernels_math.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace voxseg::cuda {

namespace {

// The host window's mirrored copies (normalized order) of a 3D patch, as the kernels' flip masks.
std::vector<int> flipMasks(const engine::SlidingWindowOptions& options) {
    const std::vector<unsigned> sets = engine::flipSets(options.mirror_axes, 3, false);
    return std::vector<int>(sets.begin(), sets.end());
}

}  // namespace

Status validateCudaWindowOptions(const engine::SlidingWindowOptions& options) {
    VOXSEG_RETURN_IF_ERROR(engine::validateSlidingWindowOptions(options, {}));
    if (options.patch_size.size() != 3)
        return unsupported("the cuda sliding window runs 3D patches; patch_size " +
                           engine::shapeToString(options.patch_size) + " is not 3D");
    return Status::ok();
}

Result<CudaWindowPlan> planCudaWindow(const engine::SlidingWindowOptions& options,
                                      const engine::Shape& image_shape) {
    VOXSEG_RETURN_IF_ERROR(validateCudaWindowOptions(options));
    VOXSEG_RETURN_IF_ERROR(engine::validateSlidingWindowOptions(options, image_shape));
    CudaWindowPlan plan;
    plan.grid = engine::windowGrid(options, {image_shape.begin() + 1, image_shape.end()});
    plan.origins.reserve(size_t(plan.grid.num_windows));
    for (int64_t w = 0; w < plan.grid.num_windows; ++w)
        plan.origins.push_back(engine::gridOrigin(plan.grid, w));
    plan.flips = flipMasks(options);
    return plan;
}

struct CudaSlidingWindow::Impl {
    engine::SlidingWindowOptions options;
    int64_t channels = 0;
    int batch = 1;
    AlgoCache cache;
    std::vector<std::unique_ptr<CudaCompiledGraph>> graphs;  // ensemble members
    std::vector<int> flips;                                  // TTA flip masks (0: none)
    int64_t classes = 0;
    DeviceBuffer gauss, volume, accum, weight_sum, labels, probs;
    PinnedBuffer pinned_in, pinned_labels, pinned_probs;
    cudaStream_t copy_stream = nullptr;
    std::vector<cudaEvent_t> events;
    cudaEvent_t member_sync = nullptr;  // orders ensemble members' streams (runBatch)
    size_t peak = 0;

    ~Impl() {
        for (cudaEvent_t e : events) cudaEventDestroy(e);
        if (member_sync) cudaEventDestroy(member_sync);
        if (copy_stream) cudaStreamDestroy(copy_stream);
    }
    Result<cudaEvent_t> event(size_t i) {
        while (events.size() <= i) {
            cudaEvent_t e = nullptr;
            VOXSEG_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            events.push_back(e);
        }
        return events[i];
    }
    // Grows `buffer` to at least `bytes` (contents discarded).
    static Status ensure(DeviceBuffer& buffer, size_t bytes, const char* what) {
        if (buffer.bytes() >= bytes) return Status::ok();
        buffer = DeviceBuffer();
        VOXSEG_ASSIGN_OR_RETURN(buffer, DeviceBuffer::allocate(bytes, what));
        return Status::ok();
    }
    static Status ensure(PinnedBuffer& buffer, size_t bytes, const char* what) {
        if (buffer.bytes() >= bytes) return Status::ok();
        buffer = PinnedBuffer();
        VOXSEG_ASSIGN_OR_RETURN(buffer, PinnedBuffer::allocate(bytes, what));
        return Status::ok();
    }
    Result<CudaSlidingWindowResult> run(const engine::Tensor& image, const Progress& progress,
                                        bool return_probabilities);
    // One network run over patches [first, first + count) of `origins`, mirrored by `flip`:
    // gather on `graph`'s input, run, accumulate. Unused slots of the last batch keep old
    // patches: computed, never accumulated. Members other than graphs[0] have their own stream,
    // ordered after graphs[0]'s with member_sync both ways.
    Status runBatch(CudaCompiledGraph& graph, const std::vector<std::array<int64_t, 3>>& origins,
                    size_t first, size_t count, int flip, Box size, Box pad, Box padded);
};

Status CudaSlidingWindow::Impl::runBatch(CudaCompiledGraph& graph,
                                         const std::vector<std::array<int64_t, 3>>& origins,
                                         size_t first, size_t count, int flip, Box size, Box pad,
                                         Box padded) {
    cudaStream_t main = graphs[0]->stream();
    cudaStream_t own = graph.stream();
    if (own != main) {
        VOXSEG_CUDA_CHECK(cudaEventRecord(member_sync, main));
        VOXSEG_CUDA_CHECK(cudaStreamWaitEvent(own, member_sync, 0));
    }
    const auto& p = options.patch_size;
    const Box patch{p[0], p[1], p[2]};
    const View in = graph.inputView(0);
    const View out = graph.outputView(0);
    for (size_t i = 0; i < count; ++i) {
        const auto& o = origins[first + i];
        VOXSEG_RETURN_IF_ERROR(launchGatherPatch(volume.as<float>(), size, pad, {o[0], o[1], o[2]},
                                                 patch, in, graph.storage(), int64_t(i), own,
                                                 flip));
    }
    VOXSEG_RETURN_IF_ERROR(graph.runDevice());
    for (size_t i = 0; i < count; ++i) {
        const auto& o = origins[first + i];
        VOXSEG_RETURN_IF_ERROR(launchAccumulatePatch(
            out, graph.storage(), int64_t(i), gauss.as<float>(), patch, {o[0], o[1], o[2]}, padded,
            accum.as<float>(), weight_sum.as<float>(), own, flip));
    }
    if (own != main) {
        VOXSEG_CUDA_CHECK(cudaEventRecord(member_sync, own));
        VOXSEG_CUDA_CHECK(cudaStreamWaitEvent(main, member_sync, 0));
    }
    return Status::ok();
}

CudaSlidingWindow::CudaSlidingWindow(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaSlidingWindow::~CudaSlidingWindow() = default;
int CudaSlidingWindow::batch() const { return impl_->batch; }
int64_t CudaSlidingWindow::numClasses() const { return impl_->classes; }
std::string CudaSlidingWindow::describe() const {
    return fmt::format("cuda sliding window (device fp32 accumulators, {} network{}, {} flip{})",
                       impl_->graphs.size(), impl_->graphs.size() == 1 ? "" : "s",
                       impl_->flips.size(), impl_->flips.size() == 1 ? "" : "s");
}
double CudaSlidingWindow::flopsPerPatch() const {
    return impl_->graphs[0]->convFlops() / impl_->batch;
}
size_t CudaSlidingWindow::workspaceBytes() const {
    size_t bytes = 0;
    for (const auto& g : impl_->graphs) bytes += g->workspaceBytes();
    return bytes;
}
size_t CudaSlidingWindow::deviceBytes() const { return impl_->peak; }

Result<std::unique_ptr<CudaSlidingWindow>> CudaSlidingWindow::create(
    const engine::Graph& graph, int64_t channels, const engine::SlidingWindowOptions& options) {
    return create(std::vector<const engine::Graph*>{&graph}, channels, options);
}

Result<std::unique_ptr<CudaSlidingWindow>> CudaSlidingWindow::create(
    const std::vector<const engine::Graph*>& graphs, int64_t channels,
    const engine::SlidingWindowOptions& options) {
    if (graphs.empty()) return invalidArgument("sliding window needs a network");
    for (const engine::Graph* graph : graphs)
        if (graph->inputs.size() != 1 || graph->outputs.empty())
            return invalidArgument("sliding window needs a graph with one input");
    VOXSEG_RETURN_IF_ERROR(validateCudaWindowOptions(options));
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->channels = channels;
    impl->flips = flipMasks(options);
    const engine::CompileOptions& copts = options.compile;
    VOXSEG_CUDA_CHECK(cudaSetDevice(copts.device_index));
    const auto& p = options.patch_size;
    int batch = options.batch;
    for (;;) {
        const engine::Shape shape{batch, channels, p[0], p[1], p[2]};
        impl->graphs.clear();
        Status failed = Status::ok();
        for (const engine::Graph* graph : graphs) {
            auto compiled = CudaCompiledGraph::compile(*graph, {shape}, copts, impl->cache);
            if (!compiled.isOk()) {
                failed = compiled.status();
                break;
            }
            impl->graphs.push_back(std::move(compiled).value());
        }
        if (failed.isOk()) break;
        if (failed.code() != StatusCode::kOutOfMemory || batch == 1) return failed;
        log::warning("cuda", "batch of {} patches does not fit in GPU memory; retrying with {}",
                     batch, batch / 2);
        batch /= 2;
    }
    impl->batch = batch;
    for (size_t m = 0; m < impl->graphs.size(); ++m) {
        const auto& out = impl->graphs[m]->outputShapes()[0];
        if (out.size() != 5 || out[2] != p[0] || out[3] != p[1] || out[4] != p[2])
            return invalidArgument("network output " + engine::shapeToString(out) +
                                   " does not have the patch size: not a segmentation network");
        if (m == 0) impl->classes = out[1];
        if (out[1] != impl->classes)
            return invalidArgument(
                fmt::format("network {} of the ensemble has {} output channels, network 1 has {}",
                            m + 1, out[1], impl->classes));
    }
    const std::vector<float> importance =
        options.gaussian ? engine::importanceMap(p, options.sigma_scale, options.convention)
                         : std::vector<float>(size_t(p[0] * p[1] * p[2]), 1.0f);
    VOXSEG_ASSIGN_OR_RETURN(
        impl->gauss, DeviceBuffer::allocate(importance.size() * sizeof(float), "importance map"));
    VOXSEG_CUDA_CHECK(cudaMemcpy(impl->gauss.data(), importance.data(),
                                 importance.size() * sizeof(float), cudaMemcpyHostToDevice));
    VOXSEG_CUDA_CHECK(cudaStreamCreateWithFlags(&impl->copy_stream, cudaStreamNonBlocking));
    VOXSEG_CUDA_CHECK(cudaEventCreateWithFlags(&impl->member_sync, cudaEventDisableTiming));
    return std::unique_ptr<CudaSlidingWindow>(new CudaSlidingWindow(std::move(impl)));
}

Result<CudaSlidingWindowResult> CudaSlidingWindow::run(const engine::Tensor& image,
                                                       const Progress& progress,
                                                       bool return_probabilities) {
    return impl_->run(image, progress, return_probabilities);
}

Result<CudaSlidingWindowResult> CudaSlidingWindow::Impl::run(const engine::Tensor& image,
                                                             const Progress& progress,
                                                             bool return_probabilities) {
    if (image.rank() != 4 || image.dim(0) != channels || image.dtype() != engine::DType::kFloat32)
        return invalidArgument(fmt::format("image must be float32 [C={}, D, H, W], got {} {}",
                                           channels, engine::dtypeName(image.dtype()),
                                           engine::shapeToString(image.shape())));
    VOXSEG_ASSIGN_OR_RETURN(CudaWindowPlan plan, planCudaWindow(options, image.shape()));
    const engine::WindowGrid& grid = plan.grid;
    const std::vector<std::array<int64_t, 3>>& origins = plan.origins;
    VOXSEG_CUDA_CHECK(cudaSetDevice(options.compile.device_index));
    // The first member's stream orders the window's work (runBatch syncs the others with it).
    cudaStream_t stream = graphs[0]->stream();
    const Box size{grid.dims[0], grid.dims[1], grid.dims[2]};
    const Box padded{grid.padded[0], grid.padded[1], grid.padded[2]};
    const Box pad{grid.pad_before[0], grid.pad_before[1], grid.pad_before[2]};
    const auto& p = grid.patch;
    const int64_t vox = size.d * size.h * size.w;
    const int64_t pvox = padded.d * padded.h * padded.w;
    const int64_t slice = size.h * size.w;

    VOXSEG_RETURN_IF_ERROR(ensure(volume, size_t(channels * vox) * 4, "input volume"));
    VOXSEG_RETURN_IF_ERROR(ensure(accum, size_t(classes * pvox) * 4,
                                  "class accumulators (volume x classes x 4 bytes)"));
    VOXSEG_RETURN_IF_ERROR(ensure(weight_sum, size_t(pvox) * 4, "weight sum"));
    VOXSEG_RETURN_IF_ERROR(ensure(labels, size_t(vox) * 2, "labels"));
    VOXSEG_RETURN_IF_ERROR(ensure(pinned_in, image.bytes(), "pinned input"));
    VOXSEG_RETURN_IF_ERROR(ensure(pinned_labels, size_t(vox) * 2, "pinned labels"));
    if (return_probabilities) {
        VOXSEG_RETURN_IF_ERROR(ensure(probs, size_t(classes * vox) * 4, "probabilities"));
        VOXSEG_RETURN_IF_ERROR(
            ensure(pinned_probs, size_t(classes * vox) * 4, "pinned probabilities"));
    }
    size_t free_bytes = 0, total_bytes = 0;
    VOXSEG_RETURN_IF_ERROR(deviceMemoryInfo(&free_bytes, &total_bytes));
    peak = std::max(peak, total_bytes - free_bytes);

    // Upload in z-slabs on the copy stream; slab k's event lets patches that need it start.
    std::memcpy(pinned_in.data(), image.raw(), image.bytes());
    constexpr int64_t kSlab = 16;
    const int64_t slabs = (size.d + kSlab - 1) / kSlab;
    const float* host = pinned_in.as<float>();
    float* dev = volume.as<float>();
    for (int64_t s = 0; s < slabs; ++s) {
        const int64_t z0 = s * kSlab, z1 = std::min(size.d, z0 + kSlab);
        for (int64_t c = 0; c < channels; ++c) {
            const size_t off = size_t(c * vox + z0 * slice);
            VOXSEG_CUDA_CHECK(cudaMemcpyAsync(dev + off, host + off, size_t((z1 - z0) * slice) * 4,
                                              cudaMemcpyHostToDevice, copy_stream));
        }
        VOXSEG_ASSIGN_OR_RETURN(cudaEvent_t e, event(size_t(s)));
        VOXSEG_CUDA_CHECK(cudaEventRecord(e, copy_stream));
    }
    VOXSEG_CUDA_CHECK(cudaMemsetAsync(accum.data(), 0, size_t(classes * pvox) * 4, stream));
    VOXSEG_CUDA_CHECK(cudaMemsetAsync(weight_sum.data(), 0, size_t(pvox) * 4, stream));

    int64_t waited_slab = -1;
    int64_t finished_z = 0;  // unpadded slices already normalised and sent down
    const size_t slab_events = size_t(slabs);
    size_t download_events = 0;
    CudaSlidingWindowResult result;
    result.batch = batch;
    result.grid = grid;
    auto finalize = [&](int64_t z_end) -> Status {
        z_end = std::min(z_end, size.d);
        if (z_end <= finished_z) return Status::ok();
        VOXSEG_RETURN_IF_ERROR(launchNormalizeArgmax(
            accum.as<float>(), weight_sum.as<float>(), classes, size, pad, padded, finished_z,
            z_end, return_probabilities ? probs.as<float>() : nullptr, labels.as<uint16_t>(),
            stream));
        VOXSEG_ASSIGN_OR_RETURN(cudaEvent_t e, event(slab_events + download_events++));
        VOXSEG_CUDA_CHECK(cudaEventRecord(e, stream));
        VOXSEG_CUDA_CHECK(cudaStreamWaitEvent(copy_stream, e, 0));
        VOXSEG_CUDA_CHECK(cudaMemcpyAsync(pinned_labels.as<uint16_t>() + finished_z * slice,
                                          labels.as<uint16_t>() + finished_z * slice,
                                          size_t((z_end - finished_z) * slice) * 2,
                                          cudaMemcpyDeviceToHost, copy_stream));
        if (return_probabilities) {
            for (int64_t k = 0; k < classes; ++k) {
                const size_t off = size_t(k * vox + finished_z * slice);
                VOXSEG_CUDA_CHECK(cudaMemcpyAsync(
                    pinned_probs.as<float>() + off, probs.as<float>() + off,
                    size_t((z_end - finished_z) * slice) * 4, cudaMemcpyDeviceToHost, copy_stream));
            }
        }
        finished_z = z_end;
        return Status::ok();
    };

    for (size_t first = 0; first < origins.size(); first += size_t(batch)) {
        VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
        const size_t count = std::min(size_t(batch), origins.size() - first);
        // Wait for the slabs this batch reads (unpadded z of its last patch's end).
        const int64_t z_need = std::min(size.d, origins[first + count - 1][0] + p[0] - pad.d);
        const int64_t slab_need = std::min(slabs - 1, std::max<int64_t>(0, (z_need - 1) / kSlab));
        for (int64_t s = waited_slab + 1; s <= slab_need; ++s)
            VOXSEG_CUDA_CHECK(cudaStreamWaitEvent(stream, events[size_t(s)], 0));
        waited_slab = std::max(waited_slab, slab_need);
        for (const auto& graph : graphs) {
            for (int flip : flips) {
                VOXSEG_RETURN_IF_ERROR(
                    runBatch(*graph, origins, first, count, flip, size, pad, padded));
                ++result.forward_passes;
            }
        }
        // Slices before the next patch's start are final: normalise and download them now.
        const size_t next = first + count;
        if (next < origins.size()) VOXSEG_RETURN_IF_ERROR(finalize(origins[next][0] - pad.d));
        progress.report(next, origins.size(), "inference (cuda)");
    }
    VOXSEG_RETURN_IF_ERROR(finalize(size.d));
    VOXSEG_CUDA_CHECK(cudaStreamSynchronize(stream));
    VOXSEG_CUDA_CHECK(cudaStreamSynchronize(copy_stream));
    VOXSEG_CUDA_CHECK(cudaGetLastError());

    result.labels.resize(size_t(vox));
    std::memcpy(result.labels.data(), pinned_labels.data(), size_t(vox) * 2);
    if (return_probabilities) {
        result.probabilities =
            engine::Tensor(engine::DType::kFloat32, {classes, size.d, size.h, size.w});
        std::memcpy(result.probabilities.raw(), pinned_probs.data(), size_t(classes * vox) * 4);
    }
    VOXSEG_RETURN_IF_ERROR(deviceMemoryInfo(&free_bytes, &total_bytes));
    peak = std::max(peak, total_bytes - free_bytes);
    return result;
}

namespace {

// The product path: engine::VolumeInference over a CudaSlidingWindow returning the averaged
// logits (the pipeline resamples them to the input grid on the host).
class CudaVolumeInference final : public engine::VolumeInference {
  public:
    explicit CudaVolumeInference(std::unique_ptr<CudaSlidingWindow> window)
        : window_(std::move(window)) {}

    Result<engine::Tensor> run(const engine::Tensor& image, const Progress& progress,
                               engine::SlidingWindowStats* stats) override {
        const auto t0 = std::chrono::steady_clock::now();
        VOXSEG_ASSIGN_OR_RETURN(CudaSlidingWindowResult r, window_->run(image, progress, true));
        if (stats) {
            *stats = {};
            stats->patches = r.grid.num_windows;
            stats->forward_passes = r.forward_passes;
            stats->seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            for (const auto& starts : r.grid.starts) stats->grid.push_back(int64_t(starts.size()));
            // On the device: K class sums + one weight volume, float32.
            stats->accumulator_bytes = size_t((window_->numClasses() + 1) * r.grid.voxels) * 4;
            stats->workspace_bytes = window_->workspaceBytes();
        }
        return std::move(r.probabilities);
    }
    int64_t numClasses() const override { return window_->numClasses(); }
    engine::DType accumulator() const override { return engine::DType::kFloat32; }
    std::string describe() const override { return window_->describe(); }

  private:
    std::unique_ptr<CudaSlidingWindow> window_;
};

}  // namespace

Result<std::unique_ptr<engine::VolumeInference>> makeCudaVolumeInference(
    const std::vector<const engine::Graph*>& graphs, int64_t channels,
    const engine::SlidingWindowOptions& options) {
    VOXSEG_ASSIGN_OR_RETURN(auto window, CudaSlidingWindow::create(graphs, channels, options));
    return std::unique_ptr<engine::VolumeInference>(
        std::make_unique<CudaVolumeInference>(std::move(window)));
}

Result<CudaSlidingWindowResult> slidingWindowCuda(const engine::Graph& graph,
                                                  const engine::Tensor& image,
                                                  const engine::SlidingWindowOptions& options,
                                                  const Progress& progress,
                                                  bool return_probabilities) {
    if (image.rank() != 4) return invalidArgument("image must be [C, D, H, W]");
    VOXSEG_ASSIGN_OR_RETURN(auto window, CudaSlidingWindow::create(graph, image.dim(0), options));
    return window->run(image, progress, return_probabilities);
}

}  // namespace voxseg::cuda
