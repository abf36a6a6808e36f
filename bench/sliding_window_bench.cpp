// Cost of host sliding-window inference without the network: patch gather, Gaussian-weighted
// scatter into the K x volume accumulator, weight sums and normalisation. The "network" copies
// its input channel into K output channels (a memcpy per class), timed separately and
// subtracted, so the figures are the overhead a real network pays on top of its own time.
//
// Usage: voxseg_bench_sliding_window [--repeat N] [D H W patch classes batch mirror_axes]...
// With no case given it runs the table in docs/perf-sliding-window.md.
#include "engine/inference/sliding_window.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace voxseg;
using namespace voxseg::engine;

class CopyNetwork : public CompiledGraph {
  public:
    CopyNetwork(Shape in, Shape out) : in_{std::move(in)}, out_{std::move(out)} {}
    const std::vector<Shape>& inputShapes() const override { return in_; }
    const std::vector<Shape>& outputShapes() const override { return out_; }
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
        outputs.resize(1);
        if (outputs[0].shape() != out_[0]) outputs[0] = Tensor(DType::kFloat32, out_[0]);
        const int64_t batch = in_[0][0], channels = in_[0][1], classes = out_[0][1];
        const int64_t voxels = numel(in_[0]) / (batch * channels);
        for (int64_t n = 0; n < batch; ++n)
            for (int64_t k = 0; k < classes; ++k)
                std::memcpy(outputs[0].data<float>() + (n * classes + k) * voxels,
                            inputs[0].data<float>() + n * channels * voxels,
                            static_cast<size_t>(voxels) * sizeof(float));
        return Status::ok();
    }
    size_t workspaceBytes() const override { return 0; }
    std::string describe() const override { return "copy"; }

  private:
    std::vector<Shape> in_, out_;
};

struct Case {
    int64_t d, h, w, patch, classes;
    int batch;
    int mirror_axes;  // 0 = none, n = axes 0..n-1
};

void runCase(const Case& c, int repeat) {
    const std::vector<int64_t> patch = {c.patch, c.patch, c.patch};
    SlidingWindowOptions o;
    o.patch_size = patch;
    o.batch = c.batch;
    for (int a = 0; a < c.mirror_axes; ++a) o.mirror_axes.push_back(a);
    Shape in = {c.batch, 1, c.patch, c.patch, c.patch};
    Shape out = {c.batch, c.classes, c.patch, c.patch, c.patch};
    auto sw = SlidingWindow::create(std::make_unique<CopyNetwork>(in, out), o);
    if (!sw.isOk()) {
        std::fprintf(stderr, "%s\n", sw.status().toString().c_str());
        std::exit(1);
    }
    Tensor image(DType::kFloat32, {1, c.d, c.h, c.w});
    for (int64_t i = 0; i < image.numel(); ++i)
        image.data<float>()[i] = static_cast<float>(i % 1000) * 1e-3f;
    double best_overhead = 1e30, best_total = 1e30, best_network = 0;
    SlidingWindowStats stats;
    for (int r = 0; r < repeat; ++r) {
        auto result = (*sw)->run(image, {}, &stats);
        if (!result.isOk()) {
            std::fprintf(stderr, "%s\n", result.status().toString().c_str());
            std::exit(1);
        }
        const double overhead = stats.seconds - stats.network_seconds;
        if (overhead < best_overhead) {
            best_overhead = overhead;
            best_total = stats.seconds;
            best_network = stats.network_seconds;
        }
    }
    const int64_t items = stats.patches << c.mirror_axes;
    std::printf(
        "| %lldx%lldx%lld | %lld^3 | %lld | %d | %d | %lld | %.3f | %.3f | %.0f | %.2f | %.0f |\n",
        static_cast<long long>(c.d), static_cast<long long>(c.h), static_cast<long long>(c.w),
        static_cast<long long>(c.patch), static_cast<long long>(c.classes), c.batch,
        1 << c.mirror_axes, static_cast<long long>(items), best_total, best_network,
        static_cast<double>(items) / best_overhead,
        1e3 * best_overhead / static_cast<double>(items),
        static_cast<double>(stats.accumulator_bytes) / (1 << 20));
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    int repeat = 3;
    std::vector<Case> cases;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--repeat" && i + 1 < argc) {
            repeat = std::atoi(argv[++i]);
        } else if (i + 6 < argc) {
            cases.push_back({std::atoll(argv[i]), std::atoll(argv[i + 1]), std::atoll(argv[i + 2]),
                             std::atoll(argv[i + 3]), std::atoll(argv[i + 4]),
                             std::atoi(argv[i + 5]), std::atoi(argv[i + 6])});
            i += 6;
        } else {
            std::fprintf(stderr,
                         "usage: %s [--repeat N] [D H W patch classes batch mirror_axes]...\n",
                         argv[0]);
            return 2;
        }
    }
    if (cases.empty()) {
        cases = {
            {256, 256, 256, 128, 3, 1, 0},  // MLPerf KiTS-like
            {256, 256, 256, 128, 3, 2, 0},  //
            {256, 256, 256, 128, 3, 2, 3},  // + mirroring (8 passes per patch)
            {200, 320, 320, 96, 14, 2, 0},  // many classes
            {128, 160, 112, 64, 3, 4, 0},   // small patches: per-patch overhead dominates
        };
    }
    std::printf(
        "| volume | patch | K | batch | passes/patch | network items | total s | "
        "network s | overhead items/s | overhead ms/item | accumulators MiB |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Case& c : cases) runCase(c, repeat);
    return 0;
}
