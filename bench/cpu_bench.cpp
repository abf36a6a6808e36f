// voxseg_bench_cpu: times one ONNX network on the oneDNN CPU backend, the voxseg side of
// tools/bench_cpu.py (which runs PyTorch and ONNX Runtime on the same weights and input).
//
//   voxseg_bench_cpu --model net.onnx --input-shape 1,1,128,128,128 [--input x.f32]
//                    [--output y.f32] [--precision fp32|bf16] [--threads 2] [--runs 2]
//                    [--warmup 1] [--ceiling-model conv.onnx --ceiling-shape 1,64,64,64,64]
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
#include "engine/onnx/import.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
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

struct Timed {
    std::vector<double> times;
    double compile_s = 0, gflop = 0;
    size_t workspace_bytes = 0;
    double best() const {
        double b = times.empty() ? 0 : times[0];
        for (double t : times) b = std::min(b, t);
        return b;
    }
};

// Imports, compiles and runs `model` warmup + runs times on a zero (or read) input; the
// human summary on stderr. Returns 0 or the exit status to fail with.
int timeModel(const std::string& model, const Shape& shape, const std::string& input_path,
              const std::string& output_path, Precision precision, int threads, int runs,
              int warmup, Timed& timed, bool describe) {
    OnnxImportOptions io;
    io.input_shapes = {shape};
    auto graph = importOnnx(model, io);
    if (!graph) return fail(graph.status().toString());

    Tensor input(DType::kFloat32, shape);
    if (!input_path.empty()) {
        std::ifstream f(input_path, std::ios::binary);
        f.read(static_cast<char*>(input.raw()), static_cast<std::streamsize>(input.bytes()));
        if (!f)
            return fail("cannot read " + std::to_string(input.bytes()) + " bytes from " +
                        input_path);
    }

    auto backend = makeCpuBackend();
    CompileOptions options;
    options.precision = precision;
    options.num_threads = threads;
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
    if (describe) std::cerr << (*exe)->describe() << "\n";
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
        else
            return fail("unknown argument '" + a + "' (see the header of bench/cpu_bench.cpp)");
    }
    Shape shape;
    if (model.empty() || !parseShape(shape_text, shape))
        return fail("--model and --input-shape are required");
    auto precision = parsePrecision(precision_name);
    if (!precision) return fail(precision.status().toString());

    Timed net;
    if (int rc = timeModel(model, shape, input_path, output_path, *precision, threads, runs, warmup,
                           net, true))
        return rc;
    std::cout << "{\"times\": [";
    for (size_t i = 0; i < net.times.size(); ++i) std::cout << (i ? ", " : "") << net.times[i];
    std::cout << "], \"compile_s\": " << net.compile_s << ", \"gflop\": " << net.gflop
              << ", \"workspace_bytes\": " << net.workspace_bytes;
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
