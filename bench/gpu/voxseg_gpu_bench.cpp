// voxseg GPU benchmark: imports the ONNX U-Net written by torch_unet.py (same weights as the
// PyTorch peer), checks voxseg's logits against PyTorch's fp32 logits on a fixed patch, then
// measures patches/s, achieved TFLOP/s, share of dense bf16 peak and device memory for each
// precision and batch size, and times an end-to-end sliding window on a whole volume.
// Results: one JSON object per line on stdout and in --json. Run by bench/gpu/run_gpu_bench.sh.
// Precisions int8 and fp8 (cuda/int8_conv.h) run with a record calibrated here, on the cpu
// backend's fp32 network with an activation observer (min/max over the check patch, or a seeded
// patch without one; the first and last conv kept float): a benchmark's calibration, not `voxseg
// model calibrate`'s.
//
//   voxseg_gpu_bench --onnx unet.onnx [--check-input f --check-logits f] [--precisions fp16,bf16]
//                    [--batches 1,2,4,8] [--seconds 2] [--volume 256] [--json out.json]
//                    [--import-only] [--input-shape C,D,H,W]
//
// --input-shape (default 1,128,128,128, the U-Net's patch): another network's input, e.g.
// 8,192,192,192 for the official-size nnInteractive network (torch_resencl.py); the accuracy
// check and the sliding window need the default.
#include "core/log.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_errors.h"
#include "cuda/cuda_graph.h"
#include "cuda/cuda_sliding_window.h"
#include "cuda/device_memory.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/graph/graph.h"
#include "engine/inference/sliding_window.h"
#include "engine/onnx/import.h"
#include "engine/passes/optimize.h"
#include "engine/quant/int8_policy.h"
#include "engine/quant/quantization_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using voxseg::Result;
using voxseg::Status;
using voxseg::engine::Precision;
using voxseg::engine::Shape;
using voxseg::engine::Tensor;

// H100 / H200 SXM dense bf16/fp16 tensor-core peak from NVIDIA's datasheets (1979 TFLOP/s with 2:4
// sparsity, half of it dense). The share of peak is reported against this figure.
constexpr double kDenseBf16PeakTflops = 989.4;
constexpr int64_t kPatch = 128;

struct Args {
    std::string onnx, check_input, check_logits, json;
    std::vector<std::string> precisions{"fp16", "bf16"};
    std::vector<int> batches{1, 2, 4, 8};
    double seconds = 2.0;
    int64_t volume = 256;
    int window_batch = 0;  // 0: best batch from the throughput runs
    bool import_only = false;
    Shape input{1, kPatch, kPatch, kPatch};  // C, D, H, W of one patch
    bool defaultInput() const { return input == Shape{1, kPatch, kPatch, kPatch}; }
    Shape batchShape(int64_t batch) const {
        return {batch, input[0], input[1], input[2], input[3]};
    }
};

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        const size_t end = s.find(',', start);
        out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return out;
}

FILE* g_json = nullptr;
void emit(const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    if (g_json) {
        std::fprintf(g_json, "%s\n", line.c_str());
        std::fflush(g_json);
    }
}

std::string jsonEscape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

// The int8 record every int8 compile of this run uses (calibrateInt8).
std::shared_ptr<const voxseg::engine::QuantizationRecord> g_int8_record;

// Min/max ranges of the int8 candidate tensors of `graph` (optimised) on `x`, observed on the
// cpu backend's fp32 run.
Result<std::shared_ptr<const voxseg::engine::QuantizationRecord>> calibrateInt8(
    const voxseg::engine::Graph& graph, const Tensor& x) {
    namespace quant = voxseg::engine::quant;
    auto record = std::make_shared<voxseg::engine::QuantizationRecord>();
    record->weight_bits = 8;
    record->method = voxseg::engine::RangeMethod::kMinMax;
    record->float_layers = quant::defaultInt8FloatLayers(graph);
    record->calibration_cases = {"check patch"};
    std::map<std::string, std::pair<float, float>> range;
    voxseg::engine::CompileOptions options;
    options.observer.tensors = quant::int8CandidateTensors(graph, record->float_layers);
    options.observer.callback = [&](const std::string& name, const float* d, const Shape& shape) {
        const auto [lo, hi] = std::minmax_element(d, d + voxseg::engine::numel(shape));
        range[name] = {*lo, *hi};
    };
    VOXSEG_ASSIGN_OR_RETURN(auto exe,
                            voxseg::engine::makeCpuBackend()->compile(graph, {x.shape()}, options));
    std::vector<Tensor> out;
    VOXSEG_RETURN_IF_ERROR(exe->run({x}, out));
    for (const auto& [name, r] : range) {
        VOXSEG_ASSIGN_OR_RETURN(record->activations[name],
                                quant::activationQuantFromRange(r.first, r.second, name));
    }
    return std::shared_ptr<const voxseg::engine::QuantizationRecord>(std::move(record));
}

Result<std::vector<float>> readFloats(const std::string& path, size_t count) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return voxseg::Status(voxseg::StatusCode::kNotFound, "cannot open", path);
    std::vector<float> v(count);
    in.read(reinterpret_cast<char*>(v.data()), std::streamsize(count * sizeof(float)));
    if (size_t(in.gcount()) != count * sizeof(float))
        return voxseg::Status(voxseg::StatusCode::kCorruptData, "file too short", path);
    return v;
}

size_t deviceUsed() {
    size_t free_bytes = 0, total = 0;
    if (!voxseg::cuda::deviceMemoryInfo(&free_bytes, &total).isOk()) return 0;
    return total - free_bytes;
}

Status checkAccuracy(const voxseg::engine::Graph& graph, const Args& args,
                     voxseg::cuda::AlgoCache& cache) {
    const size_t in_count = size_t(kPatch * kPatch * kPatch);
    VOXSEG_ASSIGN_OR_RETURN(auto input, readFloats(args.check_input, in_count));
    VOXSEG_ASSIGN_OR_RETURN(auto want, readFloats(args.check_logits, 3 * in_count));
    const Tensor x = Tensor::fromFloats({1, 1, kPatch, kPatch, kPatch}, input);
    for (const char* name : {"fp32", "fp16", "bf16", "int8", "fp8"}) {
        VOXSEG_ASSIGN_OR_RETURN(Precision p, voxseg::engine::parsePrecision(name));
        if (voxseg::engine::usesCalibration(p) && !g_int8_record) continue;
        voxseg::engine::CompileOptions options;
        options.precision = p;
        options.quantization = g_int8_record;
        auto exe = voxseg::cuda::CudaCompiledGraph::compile(graph, {x.shape()}, options, cache);
        if (!exe.isOk()) {
            emit(fmt::format(R"({{"kind":"check","precision":"{}","error":"{}"}})", name,
                             jsonEscape(exe.status().toString())));
            continue;
        }
        std::vector<Tensor> out;
        const Status s = (*exe)->run({x}, out);
        if (!s.isOk()) {
            emit(fmt::format(R"({{"kind":"check","precision":"{}","error":"{}"}})", name,
                             jsonEscape(s.toString())));
            continue;
        }
        const float* got = out[0].data<float>();
        double max_abs = 0, sum_sq = 0, ref_sq = 0;
        int64_t agree = 0;
        const int64_t n = int64_t(in_count);
        for (int64_t v = 0; v < n; ++v) {
            int a = 0, b = 0;
            for (int k = 0; k < 3; ++k) {
                const double d = double(got[k * n + v]) - double(want[size_t(k * n + v)]);
                max_abs = std::max(max_abs, std::abs(d));
                sum_sq += d * d;
                ref_sq += double(want[size_t(k * n + v)]) * want[size_t(k * n + v)];
                if (got[k * n + v] > got[a * n + v]) a = k;
                if (want[size_t(k * n + v)] > want[size_t(b * n + v)]) b = k;
            }
            agree += a == b;
        }
        emit(fmt::format(
            R"({{"kind":"check","precision":"{}","max_abs_vs_torch_fp32":{:.6g},"rel_l2_vs_torch_fp32":{:.6g},"label_agreement_vs_torch_fp32":{:.6f},"kernels":"{}"}})",
            name, max_abs, std::sqrt(sum_sq / std::max(ref_sq, 1e-30)), double(agree) / double(n),
            jsonEscape((*exe)->describe())));
    }
    return Status::ok();
}

struct Throughput {
    double patches_per_s = 0;
    bool ok = false;
};

Throughput benchOne(const voxseg::engine::Graph& graph, const std::string& pname, int batch,
                    const Args& args, voxseg::cuda::AlgoCache& cache) {
    Throughput result;
    auto p = voxseg::engine::parsePrecision(pname);
    if (!p.isOk()) return result;
    voxseg::engine::CompileOptions options;
    options.precision = *p;
    options.quantization = g_int8_record;
    const Shape shape = args.batchShape(batch);
    const auto t0 = std::chrono::steady_clock::now();
    auto exe = voxseg::cuda::CudaCompiledGraph::compile(graph, {shape}, options, cache);
    const double compile_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto fail = [&](const Status& s) {
        emit(fmt::format(
            R"({{"kind":"throughput","impl":"voxseg","precision":"{}","batch":{},"error":"{}","code":"{}"}})",
            pname, batch, jsonEscape(s.toString()), voxseg::statusCodeName(s.code())));
        return result;
    };
    if (!exe.isOk()) return fail(exe.status());
    auto& g = **exe;
    std::mt19937 rng(7);
    std::normal_distribution<float> dist;
    std::vector<float> values(size_t(voxseg::engine::numel(shape)));
    for (float& v : values) v = dist(rng);
    std::vector<Tensor> outs;
    Status s = g.run({Tensor::fromFloats(shape, values)}, outs);
    if (!s.isOk()) return fail(s);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    for (int i = 0; i < 2; ++i)
        if (!(s = g.runDevice()).isOk()) return fail(s);
    cudaEventRecord(start, g.stream());
    if (!(s = g.runDevice()).isOk()) return fail(s);
    cudaEventRecord(stop, g.stream());
    cudaEventSynchronize(stop);
    float one_ms = 0;
    cudaEventElapsedTime(&one_ms, start, stop);
    const int iters = std::clamp(int(args.seconds * 1000.0 / std::max(one_ms, 0.01f)), 3, 200);
    std::vector<float> times;
    for (int i = 0; i < iters; ++i) {
        cudaEventRecord(start, g.stream());
        if (!(s = g.runDevice()).isOk()) return fail(s);
        cudaEventRecord(stop, g.stream());
        cudaEventSynchronize(stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        times.push_back(ms);
    }
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return fail(voxseg::cuda::cudaStatus(err, "benchmark loop"));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(times.begin(), times.end());
    const double median_s = times[times.size() / 2] / 1000.0;
    // What a caller with host tensors waits for (an interactive click): upload, run, download.
    const Tensor host_input = Tensor::fromFloats(shape, values);
    std::vector<double> host_times;
    for (int i = 0; i < 5; ++i) {
        const auto h0 = std::chrono::steady_clock::now();
        if (!(s = g.run({host_input}, outs)).isOk()) return fail(s);
        host_times.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count());
    }
    std::sort(host_times.begin(), host_times.end());
    const double flops = g.convFlops();
    const double tflops = flops / median_s / 1e12;
    result.patches_per_s = batch / median_s;
    result.ok = true;
    emit(fmt::format(
        R"({{"kind":"throughput","impl":"voxseg","precision":"{}","batch":{},"iters":{},"median_s":{:.6f},"min_s":{:.6f},"patches_per_s":{:.3f},"conv_gflop_per_patch":{:.2f},"tflops":{:.2f},"share_of_dense_bf16_peak":{:.4f},"peak_tflops_used":{},"compile_s":{:.2f},"host_round_trip_s":{:.6f},"held_bytes":{},"device_used_bytes":{},"kernels":"{}"}})",
        pname, batch, iters, median_s, times.front() / 1000.0, result.patches_per_s,
        flops / batch / 1e9, tflops, tflops / kDenseBf16PeakTflops, kDenseBf16PeakTflops, compile_s,
        host_times[host_times.size() / 2], g.workspaceBytes(), deviceUsed(),
        jsonEscape(g.describe())));
    return result;
}

// The whole-volume path `voxseg segment --device cuda` takes (Backend::makeSlidingWindow: the
// CUDA sliding window behind engine::VolumeInference, scores downloaded for the host's export),
// so the figure is the product's, not a bench-only loop's.
void benchWindow(voxseg::engine::Backend& backend, const voxseg::engine::Graph& graph,
                 const std::string& pname, int batch, const Args& args) {
    auto p = voxseg::engine::parsePrecision(pname);
    if (!p.isOk()) return;
    voxseg::engine::SlidingWindowOptions options;
    options.patch_size = {kPatch, kPatch, kPatch};
    options.overlap = 0.5;
    options.batch = batch;
    options.compile.precision = *p;
    options.compile.quantization = g_int8_record;
    const int64_t v = args.volume;
    // A smooth synthetic "image": sums of sines plus noise (content does not change the timing).
    std::vector<float> img(size_t(v * v * v));
    std::mt19937 rng(11);
    std::normal_distribution<float> noise(0.0f, 0.1f);
    for (int64_t z = 0; z < v; ++z)
        for (int64_t y = 0; y < v; ++y)
            for (int64_t x = 0; x < v; ++x)
                img[size_t((z * v + y) * v + x)] =
                    std::sin(0.05f * z) + std::cos(0.07f * y) * std::sin(0.03f * x) + noise(rng);
    const Tensor image = Tensor::fromFloats({1, v, v, v}, img);
    auto fail = [&](const Status& s) {
        emit(fmt::format(R"({{"kind":"window","precision":"{}","batch":{},"error":"{}"}})", pname,
                         batch, jsonEscape(s.toString())));
    };
    auto window = backend.makeSlidingWindow({&graph}, 1, options);
    if (!window.isOk()) return fail(window.status());
    std::vector<double> secs;
    voxseg::engine::SlidingWindowStats stats;
    std::vector<int64_t> histogram(3, 0);
    for (int i = 0; i < 3; ++i) {  // first run warms up (pinned buffers, accumulators)
        const auto t0 = std::chrono::steady_clock::now();
        auto r = (*window)->run(image, {}, &stats);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!r.isOk()) return fail(r.status());
        if (i > 0) secs.push_back(s);
        if (i == 0) {  // argmax of the scores, as the host export computes it
            const int64_t k = r->dim(0), voxels = r->numel() / k;
            const float* scores = r->data<float>();
            for (int64_t x = 0; x < voxels; ++x) {
                int64_t best = 0;
                for (int64_t c = 1; c < k; ++c)
                    if (scores[c * voxels + x] > scores[best * voxels + x]) best = c;
                ++histogram[size_t(std::min<int64_t>(best, 2))];
            }
        }
    }
    std::sort(secs.begin(), secs.end());
    emit(fmt::format(
        R"({{"kind":"window","path":"{}","precision":"{}","volume":[{},{},{}],"patch":{},"overlap":0.5,"batch":{},"patches":{},"forward_passes":{},"seconds_per_case":{:.4f},"patches_per_s":{:.2f},"accumulator_bytes":{},"workspace_bytes":{},"device_used_bytes":{},"label_histogram":[{},{},{}]}})",
        jsonEscape((*window)->describe()), pname, v, v, v, kPatch, batch, stats.patches,
        stats.forward_passes, secs.front(), stats.patches / secs.front(), stats.accumulator_bytes,
        stats.workspace_bytes, deviceUsed(), histogram[0], histogram[1], histogram[2]));
}

int run(const Args& args) {
    voxseg::engine::OnnxImportOptions import_options;
    import_options.input_shapes = {args.batchShape(1)};
    const auto t0 = std::chrono::steady_clock::now();
    auto imported = voxseg::engine::importOnnx(args.onnx, import_options);
    if (!imported.isOk()) {
        emit(fmt::format(R"({{"kind":"import","error":"{}"}})",
                         jsonEscape(imported.status().toString())));
        return 3;
    }
    const voxseg::engine::Graph graph = voxseg::engine::optimize(*imported);
    const double import_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    emit(fmt::format(
        R"({{"kind":"import","nodes":{},"optimized_nodes":{},"conv_gflop_per_patch":{:.2f},"seconds":{:.2f}}})",
        imported->nodes.size(), graph.nodes.size(), imported->convFlops() / 1e9, import_s));
    if (args.import_only) return 0;

    auto backend = voxseg::cuda::makeCudaBackend();
    if (!backend.isOk()) {
        emit(fmt::format(R"({{"kind":"device","error":"{}"}})",
                         jsonEscape(backend.status().toString())));
        return 2;
    }
    emit(fmt::format(R"({{"kind":"device","description":"{}"}})",
                     jsonEscape((*backend)->deviceDescription())));
    voxseg::cuda::AlgoCache cache;
    const auto asked = [&](const char* p) {
        return std::find(args.precisions.begin(), args.precisions.end(), p) !=
               args.precisions.end();
    };
    if (asked("int8") || asked("fp8") || !args.check_input.empty()) {
        const size_t count = size_t(voxseg::engine::numel(args.batchShape(1)));
        std::vector<float> patch;
        if (!args.check_input.empty() && args.defaultInput()) {
            auto read = readFloats(args.check_input, count);
            if (read.isOk()) patch = std::move(read).value();
        }
        if (patch.empty()) {
            std::mt19937 rng(5);
            std::normal_distribution<float> normal(0.0f, 1.0f);
            patch.resize(count);
            for (float& v : patch) v = normal(rng);
        }
        const auto c0 = std::chrono::steady_clock::now();
        auto record = calibrateInt8(graph, Tensor::fromFloats(args.batchShape(1), patch));
        const double calib_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
        if (record.isOk()) {
            g_int8_record = std::move(record).value();
            emit(fmt::format(R"({{"kind":"int8_calibration","tensors":{},"seconds":{:.2f}}})",
                             g_int8_record->activations.size(), calib_s));
        } else {
            emit(fmt::format(R"({{"kind":"int8_calibration","error":"{}"}})",
                             jsonEscape(record.status().toString())));
        }
    }
    if (!args.check_input.empty() && args.defaultInput()) {
        const Status s = checkAccuracy(graph, args, cache);
        if (!s.isOk())
            emit(fmt::format(R"({{"kind":"check","error":"{}"}})", jsonEscape(s.toString())));
    }
    int best_batch = 1;
    double best_rate = 0;
    for (const std::string& p : args.precisions) {
        for (int b : args.batches) {
            const Throughput t = benchOne(graph, p, b, args, cache);
            if (!t.ok) break;  // larger batches would fail the same way (memory)
            if (t.patches_per_s > best_rate) best_rate = t.patches_per_s, best_batch = b;
        }
    }
    if (args.volume > 0 && args.defaultInput())
        for (const std::string& p : args.precisions)
            benchWindow(**backend, graph, p, args.window_batch > 0 ? args.window_batch : best_batch,
                        args);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--onnx")
            args.onnx = next();
        else if (a == "--check-input")
            args.check_input = next();
        else if (a == "--check-logits")
            args.check_logits = next();
        else if (a == "--json")
            args.json = next();
        else if (a == "--precisions")
            args.precisions = split(next());
        else if (a == "--batches") {
            args.batches.clear();
            for (const auto& b : split(next())) args.batches.push_back(std::stoi(b));
        } else if (a == "--seconds")
            args.seconds = std::stod(next());
        else if (a == "--volume")
            args.volume = std::stoll(next());
        else if (a == "--window-batch")
            args.window_batch = std::stoi(next());
        else if (a == "--import-only")
            args.import_only = true;
        else if (a == "--input-shape") {
            args.input.clear();
            for (const auto& d : split(next())) args.input.push_back(std::stoll(d));
            if (args.input.size() != 4) {
                std::fprintf(stderr, "--input-shape needs C,D,H,W\n");
                return 64;
            }
        } else {
            std::fprintf(stderr, "unknown argument %s (see the header of voxseg_gpu_bench.cpp)\n",
                         a.c_str());
            return 64;
        }
    }
    if (args.onnx.empty()) {
        std::fprintf(stderr, "--onnx is required\n");
        return 64;
    }
    if (!args.json.empty()) g_json = std::fopen(args.json.c_str(), "w");
    const int rc = run(args);
    if (g_json) std::fclose(g_json);
    return rc;
}
