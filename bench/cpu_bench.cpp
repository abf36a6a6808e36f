// voxseg_bench_cpu: times one ONNX network on the oneDNN CPU backend, the voxseg side of
// tools/bench_cpu.py (which runs PyTorch and ONNX Runtime on the same weights and input).
//
//   voxseg_bench_cpu --model net.onnx --input-shape 1,1,128,128,128 [--input x.f32]
//                    [--output y.f32] [--precision fp32|bf16|int8] [--threads 2] [--runs 2]
//                    [--warmup 1] [--ceiling-model conv.onnx --ceiling-shape 1,64,64,64,64]
//                    [--calib a.f32,b.f32] [--calib-method percentile|minmax]
//                    [--percentile 99.99] [--weight-bits 7|8] [--norm-inputs float|int8]
//                    [--keep-float first,last|first|last|none] [--zero-points always|where-needed]
//                    [--upsampling float|int8] [--no-halo] [--no-fold] [--no-pairs]
//
// --precision int8 calibrates first: the fp32 network runs on each --calib input (float32 files
// of the input shape; tools/bench_cpu.py passes the inputs OpenVINO's NNCF calibrates on) with an
// activation observer (engine/activation_observer.h) on the int8 candidate tensors
// (engine/quant/int8_policy.h, the first and last conv kept float); each tensor's range is its
// min/max or its (100 - p, p) percentiles over a strided sample of at most 2^20 values per input.
// This is a benchmark's calibration, not `voxseg model calibrate`'s (no held-back validation).
// --weight-bits: default the bits this CPU multiplies exactly (cpuInt8WeightBits).
// --norm-inputs int8: Convs whose output only a normalisation reads write s8 per channel
// (engine/quant/int8_scheme.h), each channel's scale from its magnitudes as `voxseg model
// calibrate --norm-inputs int8` chooses them (pipeline/calibration_ranges.h) with the same method.
// --keep-float: which of the first and last convolution stay float (quant::int8FloatLayers).
// --zero-points where-needed: activations whose negatives are small get no zero point
// (quant::ZeroPoints, as `voxseg model calibrate --zero-points`).
// --upsampling int8: the decoder's k = s ConvTransposes run in int8 too (int8_policy.h), as
// `voxseg model calibrate --upsampling int8`.
// --no-halo: no u8 source written inside a halo and no tap channels
// (CompileOptions::int8_halo_sources): the padded zero-point convolutions, for A/B timings.
// --no-fold: the decoder's up-sampling not folded into the convolution after its concat
// (CompileOptions::fold_upsampling, engine/passes/fold_upsampling.h), at any precision.
// --no-pairs: convolutions with 8 output channels not planned on voxel pairs
// (CompileOptions::pair_narrow_convs, engine/cpu/conv_pairs.cpp).
//
// --ceiling-model: after the network, one more model (a single large convolution) compiled
// and timed the same way in the same process, at the same precision and threads: the rate the
// network's GFLOP/s is compared with (docs/perf-cpu.md, issue 14 part 6).
//
// Prints a human summary on stderr and one JSON line on stdout: per-run seconds, compile
// seconds, conv GFLOP, workspace bytes and the process's peak RSS (core/process_metrics.h).
#include "core/process_metrics.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/model_quantization.h"
#include "engine/onnx/import.h"
#include "engine/quant/int8_policy.h"
#include "pipeline/calibration_ranges.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace voxseg::engine;

double seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

int fail(const std::string& what) {
    std::cerr << "voxseg_bench_cpu: " << what << "\n";
    return 2;
}

bool parseShape(const std::string& text, Shape& shape) {
    std::stringstream ss(text);
    std::string tok;
    while (std::getline(ss, tok, ',')) shape.push_back(std::atoll(tok.c_str()));
    return !shape.empty();
}

bool readTensor(const std::string& path, Tensor& t) {
    std::ifstream f(path, std::ios::binary);
    f.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
    return static_cast<bool>(f);
}

struct Calibration {
    std::string method = "percentile";
    double percentile = 99.99;
    int weight_bits = 0;  // 0: cpuInt8WeightBits of this CPU
    bool norm_inputs_s8 = false;
    quant::Int8FloatEnds keep_float;  // --keep-float first,last (default) | first | last | none
    quant::ZeroPoints zero_points = quant::ZeroPoints::kAlways;  // --zero-points
    bool int8_upsampling = false;                                // --upsampling int8
    bool halo_sources = true;                                    // --no-halo: false
    std::vector<std::string> inputs;
    double seconds = 0;
    std::shared_ptr<QuantizationRecord> record;
};

// Per tensor: min, max and a strided sample of each observed batch.
struct Ranges {
    std::map<std::string, std::pair<float, float>> minmax;
    std::map<std::string, std::vector<float>> samples;
    void add(const std::string& name, const float* d, int64_t n) {
        auto [it, fresh] = minmax.try_emplace(name, d[0], d[0]);
        const auto [lo, hi] = std::minmax_element(d, d + n);
        it->second = {std::min(it->second.first, *lo), std::max(it->second.second, *hi)};
        const int64_t step = std::max<int64_t>(1, n >> 20);
        auto& s = samples[name];
        for (int64_t i = 0; i < n; i += step) s.push_back(d[i]);
    }
    std::pair<float, float> range(const std::string& name, const Calibration& c) {
        if (c.method == "minmax") return minmax.at(name);
        auto& s = samples.at(name);
        auto at = [&](double q) {
            const auto k = static_cast<size_t>(q * static_cast<double>(s.size() - 1));
            std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(k), s.end());
            return s[k];
        };
        return {at(1.0 - c.percentile / 100.0), at(c.percentile / 100.0)};
    }
};

// The benchmark's int8 calibration (see the header): fills c.record.
int calibrate(const Graph& graph, const Shape& shape, int threads, Calibration& c) {
    const double t0 = seconds();
    const std::vector<std::string> floats = quant::int8FloatLayers(graph, c.keep_float);
    const std::set<std::string> leaky = quant::int8LeakyReluOutputs(graph);
    Ranges ranges;
    std::map<std::string, std::vector<float>> centres;
    std::map<std::string, voxseg::pipeline::ChannelMagnitudes> magnitudes;
    CompileOptions options;
    options.num_threads = threads;
    options.observer.tensors = quant::int8CandidateTensors(graph, floats, c.int8_upsampling);
    if (c.norm_inputs_s8)
        for (const quant::Int8NormInput& in : quant::int8NormInputs(graph, floats)) {
            options.observer.tensors.push_back(in.tensor);
            centres[in.tensor] = in.dropped_bias;
        }
    options.observer.callback = [&](const std::string& name, const float* d, const Shape& s) {
        if (const auto it = centres.find(name); it != centres.end())
            magnitudes[name].add(d, s, it->second);
        else
            ranges.add(name, d, numel(s));
    };
    auto exe = makeCpuBackend()->compile(graph, {shape}, options);
    if (!exe) return fail(exe.status().toString());
    for (const std::string& path : c.inputs) {
        Tensor x(DType::kFloat32, shape);
        if (!readTensor(path, x)) return fail("cannot read calibration input " + path);
        std::vector<Tensor> out;
        if (auto s = (*exe)->run({x}, out); !s.isOk()) return fail(s.toString());
    }
    c.record = std::make_shared<QuantizationRecord>();
    c.record->weight_bits = c.weight_bits ? c.weight_bits : cpuInt8WeightBits(cpuInt8Traits());
    c.record->float_layers = floats;
    c.record->method = c.method == "minmax" ? RangeMethod::kMinMax : RangeMethod::kPercentile;
    c.record->percentile = c.percentile;
    c.record->zero_points = c.zero_points;
    c.record->int8_upsampling = c.int8_upsampling;
    c.record->calibration_cases = c.inputs;
    const RangeMethod method = c.record->method;
    for (const auto& [name, m] : magnitudes) {
        auto scales = voxseg::pipeline::calibrateChannelScales(m, method, c.percentile, name);
        if (!scales) return fail(scales.status().toString());
        c.record->norm_inputs[name] = *scales;
    }
    for (const std::string& name : options.observer.tensors) {
        if (centres.count(name)) continue;
        const auto [lo, hi] = ranges.range(name, c);
        auto q = quant::activationQuantFromRange(
            lo, hi, name, leaky.count(name) ? c.zero_points : quant::ZeroPoints::kAlways);
        if (!q) return fail(q.status().toString());
        c.record->activations[name] = *q;
    }
    c.seconds = seconds() - t0;
    std::cerr << "calibration: " << c.inputs.size() << " inputs, " << c.record->activations.size()
              << " tensors, " << c.record->norm_inputs.size() << " 8-bit norm inputs, " << c.method
              << ", " << c.record->weight_bits << "-bit weights, " << c.seconds << " s\n";
    return 0;
}

struct Timed {
    std::vector<double> times;
    double compile_s = 0, gflop = 0;
    size_t workspace_bytes = 0;
    int int8_convs = 0;
    double best() const {
        double b = times.empty() ? 0 : times[0];
        for (double t : times) b = std::min(b, t);
        return b;
    }
};

bool fold = true;   // --no-fold: false (CompileOptions::fold_upsampling)
bool pairs = true;  // --no-pairs: false (CompileOptions::pair_narrow_convs)

// Imports, compiles and runs `model` warmup + runs times on a zero (or read) input; the
// human summary on stderr. Returns 0 or the exit status to fail with.
int timeModel(const std::string& model, const Shape& shape, const std::string& input_path,
              const std::string& output_path, Precision precision, int threads, int runs,
              int warmup, Timed& timed, bool describe, Calibration* calibration = nullptr) {
    OnnxImportOptions io;
    io.input_shapes = {shape};
    auto graph = importOnnx(model, io);
    if (!graph) return fail(graph.status().toString());

    Tensor input(DType::kFloat32, shape);
    if (!input_path.empty() && !readTensor(input_path, input))
        return fail("cannot read " + std::to_string(input.bytes()) + " bytes from " + input_path);

    auto backend = makeCpuBackend();
    CompileOptions options;
    options.precision = precision;
    options.num_threads = threads;
    options.fold_upsampling = fold;
    options.pair_narrow_convs = pairs;
    if (precision == Precision::kInt8) {
        if (!calibration || calibration->inputs.empty())
            return fail("--precision int8 needs --calib inputs");
        if (int rc = calibrate(*graph, shape, threads, *calibration)) return rc;
        options.quantization = calibration->record;
        options.int8_halo_sources = calibration->halo_sources;
    }
    const double t0 = seconds();
    auto exe = backend->compile(*graph, {shape}, options);
    if (!exe) return fail(exe.status().toString());
    timed.compile_s = seconds() - t0;

    Graph shaped = *graph;
    (void)shaped.inferShapes({shape});
    timed.gflop = shaped.convFlops() / 1e9;

    std::vector<Tensor> outputs;
    for (int r = 0; r < warmup + runs; ++r) {
        const double t = seconds();
        const auto s = (*exe)->run({input}, outputs);
        if (!s.isOk()) return fail(s.toString());
        if (r >= warmup) timed.times.push_back(seconds() - t);
    }
    if (!output_path.empty()) {
        std::ofstream f(output_path, std::ios::binary);
        f.write(static_cast<const char*>(outputs[0].raw()),
                static_cast<std::streamsize>(outputs[0].bytes()));
    }
    timed.workspace_bytes = (*exe)->workspaceBytes();
    const double best = timed.best();
    const std::string text = (*exe)->describe();
    for (size_t p = text.find("conv int8"); p != std::string::npos;
         p = text.find("conv int8", p + 1))
        ++timed.int8_convs;
    if (describe) std::cerr << text << "\n";
    std::cerr << model << ": compile " << timed.compile_s << " s, best run " << best << " s, "
              << timed.gflop / best << " GFLOP/s, workspace " << (timed.workspace_bytes >> 20)
              << " MiB, peak RSS " << voxseg::peakRssMib() << " MiB\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model, input_path, output_path, precision_name = "fp32", shape_text;
    std::string ceiling_model, ceiling_shape_text;
    int threads = 2, runs = 2, warmup = 1;
    Calibration calibration;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--model")
            model = next();
        else if (a == "--input")
            input_path = next();
        else if (a == "--output")
            output_path = next();
        else if (a == "--input-shape")
            shape_text = next();
        else if (a == "--precision")
            precision_name = next();
        else if (a == "--threads")
            threads = std::atoi(next().c_str());
        else if (a == "--runs")
            runs = std::atoi(next().c_str());
        else if (a == "--warmup")
            warmup = std::atoi(next().c_str());
        else if (a == "--ceiling-model")
            ceiling_model = next();
        else if (a == "--ceiling-shape")
            ceiling_shape_text = next();
        else if (a == "--calib") {
            std::stringstream ss(next());
            for (std::string p; std::getline(ss, p, ',');) calibration.inputs.push_back(p);
        } else if (a == "--calib-method")
            calibration.method = next();
        else if (a == "--percentile")
            calibration.percentile = std::atof(next().c_str());
        else if (a == "--weight-bits")
            calibration.weight_bits = std::atoi(next().c_str());
        else if (a == "--norm-inputs")
            calibration.norm_inputs_s8 = next() == "int8";
        else if (a == "--keep-float") {
            const auto ends = quant::parseInt8FloatEnds(next());
            if (!ends) return fail("--keep-float takes first,last, first, last or none");
            calibration.keep_float = *ends;
        } else if (a == "--zero-points") {
            const auto z = quant::parseZeroPoints(next());
            if (!z) return fail("--zero-points takes always or where-needed");
            calibration.zero_points = *z;
        } else if (a == "--upsampling")
            calibration.int8_upsampling = next() == "int8";
        else if (a == "--no-halo")
            calibration.halo_sources = false;
        else if (a == "--no-fold")
            fold = false;
        else if (a == "--no-pairs")
            pairs = false;
        else
            return fail("unknown argument '" + a + "' (see the header of bench/cpu_bench.cpp)");
    }
    Shape shape;
    if (model.empty() || !parseShape(shape_text, shape))
        return fail("--model and --input-shape are required");
    auto precision = parsePrecision(precision_name);
    if (!precision) return fail(precision.status().toString());

    Timed net;
    if (calibration.method != "minmax" && calibration.method != "percentile")
        return fail("--calib-method must be minmax or percentile");
    if (int rc = timeModel(model, shape, input_path, output_path, *precision, threads, runs, warmup,
                           net, true, &calibration))
        return rc;
    std::cout << "{\"times\": [";
    for (size_t i = 0; i < net.times.size(); ++i) std::cout << (i ? ", " : "") << net.times[i];
    std::cout << "], \"compile_s\": " << net.compile_s << ", \"gflop\": " << net.gflop
              << ", \"workspace_bytes\": " << net.workspace_bytes;
    if (calibration.record)
        std::cout << ", \"int8_convs\": " << net.int8_convs << ", \"calibration\": {\"method\": \""
                  << calibration.method << "\", \"inputs\": " << calibration.inputs.size()
                  << ", \"weight_bits\": " << calibration.record->weight_bits
                  << ", \"seconds\": " << calibration.seconds << "}";
    if (!ceiling_model.empty()) {
        Shape cshape;
        if (!parseShape(ceiling_shape_text, cshape))
            return fail("--ceiling-shape is required with --ceiling-model");
        Timed conv;
        if (int rc = timeModel(ceiling_model, cshape, "", "", *precision, threads, runs, warmup,
                               conv, false))
            return rc;
        std::cout << ", \"ceiling\": {\"gflop\": " << conv.gflop << ", \"best_s\": " << conv.best()
                  << "}";
    }
    std::cout << ", \"peak_rss_mib\": " << voxseg::peakRssMib() << "}\n";
    return 0;
}
