#include "cuda/cuda_sliding_window.h"

#include "core/log.h"
#include "cuda/cuda_errors.h"
#include "cuda/cuda_graph.h"
#include "cuda/device_memory.h"
#include "cuda/kernels.h"
#include "cuda/kernels_math.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace voxseg::cuda {

std::vector<std::array<int64_t, 3>> patchOrigins(const std::array<int64_t, 3>& padded,
                                                 const std::array<int64_t, 3>& patch,
                                                 double overlap,
                                                 engine::WindowConvention convention) {
    std::vector<int64_t> starts[3];
    for (int a = 0; a < 3; ++a)
        starts[a] = engine::windowStarts(padded[a], patch[a], overlap, convention);
    std::vector<std::array<int64_t, 3>> origins;
    origins.reserve(starts[0].size() * starts[1].size() * starts[2].size());
    for (int64_t z : starts[0])
        for (int64_t y : starts[1])
            for (int64_t x : starts[2]) origins.push_back({z, y, x});
    return origins;
}

struct CudaSlidingWindow::Impl {
    CudaSlidingWindowOptions options;
    int64_t channels = 0;
    int batch = 1;
    AlgoCache cache;
    std::unique_ptr<CudaCompiledGraph> graph;
    int64_t classes = 0;
    DeviceBuffer gauss, volume, accum, weight_sum, labels, probs;
    PinnedBuffer pinned_in, pinned_labels, pinned_probs;
    cudaStream_t copy_stream = nullptr;
    std::vector<cudaEvent_t> events;
    size_t peak = 0;

    ~Impl() {
        for (cudaEvent_t e : events) cudaEventDestroy(e);
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
    Result<CudaSlidingWindowResult> run(const engine::Tensor& image, const Progress& progress);
};

CudaSlidingWindow::CudaSlidingWindow(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaSlidingWindow::~CudaSlidingWindow() = default;
int CudaSlidingWindow::batch() const { return impl_->batch; }
std::string CudaSlidingWindow::describe() const { return impl_->graph->describe(); }
double CudaSlidingWindow::flopsPerPatch() const { return impl_->graph->convFlops() / impl_->batch; }
size_t CudaSlidingWindow::deviceBytes() const { return impl_->peak; }

Result<std::unique_ptr<CudaSlidingWindow>> CudaSlidingWindow::create(
    const engine::Graph& graph, int64_t channels, const CudaSlidingWindowOptions& options) {
    if (graph.inputs.size() != 1 || graph.outputs.empty())
        return invalidArgument("sliding window needs a graph with one input");
    for (int64_t p : options.patch)
        if (p <= 0) return invalidArgument("patch size must be positive");
    if (options.overlap < 0.0 || options.overlap >= 1.0)
        return invalidArgument(fmt::format("overlap {} must be in [0, 1)", options.overlap));
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->channels = channels;
    VOXSEG_CUDA_CHECK(cudaSetDevice(options.device));
    engine::CompileOptions copts;
    copts.precision = options.precision;
    copts.device_index = options.device;
    int batch = std::max(1, options.batch);
    for (;;) {
        const engine::Shape shape{batch, channels, options.patch[0], options.patch[1],
                                  options.patch[2]};
        auto compiled = CudaCompiledGraph::compile(graph, {shape}, copts, impl->cache);
        if (compiled.isOk()) {
            impl->graph = std::move(compiled).value();
            break;
        }
        if (compiled.status().code() != StatusCode::kOutOfMemory || batch == 1)
            return compiled.status();
        log::warning("cuda", "batch of {} patches does not fit in GPU memory; retrying with {}",
                     batch, batch / 2);
        batch /= 2;
    }
    impl->batch = batch;
    const auto& out = impl->graph->outputShapes()[0];
    if (out.size() != 5 || out[2] != options.patch[0] || out[3] != options.patch[1] ||
        out[4] != options.patch[2])
        return invalidArgument("network output " + engine::shapeToString(out) +
                               " does not have the patch size: not a segmentation network");
    impl->classes = out[1];
    const std::vector<float> importance =
        engine::importanceMap({options.patch[0], options.patch[1], options.patch[2]},
                              options.sigma_scale, options.convention);
    VOXSEG_ASSIGN_OR_RETURN(
        impl->gauss, DeviceBuffer::allocate(importance.size() * sizeof(float), "importance map"));
    VOXSEG_CUDA_CHECK(cudaMemcpy(impl->gauss.data(), importance.data(),
                                 importance.size() * sizeof(float), cudaMemcpyHostToDevice));
    VOXSEG_CUDA_CHECK(cudaStreamCreateWithFlags(&impl->copy_stream, cudaStreamNonBlocking));
    return std::unique_ptr<CudaSlidingWindow>(new CudaSlidingWindow(std::move(impl)));
}

Result<CudaSlidingWindowResult> CudaSlidingWindow::run(const engine::Tensor& image,
                                                       const Progress& progress) {
    return impl_->run(image, progress);
}

Result<CudaSlidingWindowResult> CudaSlidingWindow::Impl::run(const engine::Tensor& image,
                                                             const Progress& progress) {
    if (image.rank() != 4 || image.dim(0) != channels || image.dtype() != engine::DType::kFloat32)
        return invalidArgument(fmt::format("image must be float32 [C={}, D, H, W], got {} {}",
                                           channels, engine::dtypeName(image.dtype()),
                                           engine::shapeToString(image.shape())));
    VOXSEG_CUDA_CHECK(cudaSetDevice(options.device));
    cudaStream_t stream = graph->stream();
    const Box size{image.dim(1), image.dim(2), image.dim(3)};
    const auto& p = options.patch;
    const Box patch{p[0], p[1], p[2]};
    Box padded{std::max(size.d, p[0]), std::max(size.h, p[1]), std::max(size.w, p[2])};
    const Box pad{(padded.d - size.d) / 2, (padded.h - size.h) / 2, (padded.w - size.w) / 2};
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
    if (options.return_probabilities) {
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

    const auto origins =
        patchOrigins({padded.d, padded.h, padded.w}, p, options.overlap, options.convention);
    const View in = graph->inputView(0);
    const View out = graph->outputView(0);
    int64_t waited_slab = -1;
    int64_t finished_z = 0;  // unpadded slices already normalised and sent down
    const size_t slab_events = size_t(slabs);
    size_t download_events = 0;
    CudaSlidingWindowResult result;
    result.batch = batch;
    result.patches = int64_t(origins.size());
    auto finalize = [&](int64_t z_end) -> Status {
        z_end = std::min(z_end, size.d);
        if (z_end <= finished_z) return Status::ok();
        VOXSEG_RETURN_IF_ERROR(launchNormalizeArgmax(
            accum.as<float>(), weight_sum.as<float>(), classes, size, pad, padded, finished_z,
            z_end, options.return_probabilities ? probs.as<float>() : nullptr,
            labels.as<uint16_t>(), stream));
        VOXSEG_ASSIGN_OR_RETURN(cudaEvent_t e, event(slab_events + download_events++));
        VOXSEG_CUDA_CHECK(cudaEventRecord(e, stream));
        VOXSEG_CUDA_CHECK(cudaStreamWaitEvent(copy_stream, e, 0));
        VOXSEG_CUDA_CHECK(cudaMemcpyAsync(pinned_labels.as<uint16_t>() + finished_z * slice,
                                          labels.as<uint16_t>() + finished_z * slice,
                                          size_t((z_end - finished_z) * slice) * 2,
                                          cudaMemcpyDeviceToHost, copy_stream));
        if (options.return_probabilities) {
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
        for (size_t i = 0; i < count; ++i) {
            const auto& o = origins[first + i];
            VOXSEG_RETURN_IF_ERROR(launchGatherPatch(dev, size, pad, {o[0], o[1], o[2]}, patch, in,
                                                     graph->storage(), int64_t(i), stream));
        }
        // Unused slots of the last batch keep old patches: computed, never accumulated.
        VOXSEG_RETURN_IF_ERROR(graph->runDevice());
        for (size_t i = 0; i < count; ++i) {
            const auto& o = origins[first + i];
            VOXSEG_RETURN_IF_ERROR(launchAccumulatePatch(
                out, graph->storage(), int64_t(i), gauss.as<float>(), patch, {o[0], o[1], o[2]},
                padded, accum.as<float>(), weight_sum.as<float>(), stream));
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
    if (options.return_probabilities) {
        result.probabilities =
            engine::Tensor(engine::DType::kFloat32, {classes, size.d, size.h, size.w});
        std::memcpy(result.probabilities.raw(), pinned_probs.data(), size_t(classes * vox) * 4);
    }
    VOXSEG_RETURN_IF_ERROR(deviceMemoryInfo(&free_bytes, &total_bytes));
    peak = std::max(peak, total_bytes - free_bytes);
    return result;
}

Result<CudaSlidingWindowResult> slidingWindowCuda(const engine::Graph& graph,
                                                  const engine::Tensor& image,
                                                  const CudaSlidingWindowOptions& options,
                                                  const Progress& progress) {
    if (image.rank() != 4) return invalidArgument("image must be [C, D, H, W]");
    VOXSEG_ASSIGN_OR_RETURN(auto window, CudaSlidingWindow::create(graph, image.dim(0), options));
    return window->run(image, progress);
}

}  // namespace voxseg::cuda
