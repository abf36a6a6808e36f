// voxseg_bench_cpu: times one ONNX network on the oneDNN CPU backend, the voxseg side of
// tools/bench_cpu.py (which runs PyTorch and ONNX Runtime on the same weights and input).
//
//   voxseg_bench_cpu --model net.onnx --input-shape 1,1,128,128,128 [--input x.f32]
//                    [--output y.f32] [--precision fp32|bf16] [--threads 2] [--runs 2]
//                    [--warmup 1]
//
// Prints a human summary on stderr and one JSON line on stdout: per-run seconds, compile
// seconds, conv GFLOP, workspace bytes and the process's peak RSS (getrusage).
#include "engine/backend.h"
#include "engine/cpu_backend.h"
#include "engine/onnx_import.h"

#include <sys/resource.h>

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

double peakRssMiB() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;
}

int fail(const std::string& what) {
    std::cerr << "voxseg_bench_cpu: " << what << "\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model, input_path, output_path, precision_name = "fp32", shape_text;
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
        else
            return fail("unknown argument '" + a + "' (see the header of bench/cpu_bench.cpp)");
    }
    if (model.empty() || shape_text.empty()) return fail("--model and --input-shape are required");
    Shape shape;
    {
        std::stringstream ss(shape_text);
        std::string tok;
        while (std::getline(ss, tok, ',')) shape.push_back(std::atoll(tok.c_str()));
    }
    auto precision = parsePrecision(precision_name);
    if (!precision) return fail(precision.status().toString());

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
    options.precision = *precision;
    options.num_threads = threads;
    const double t0 = seconds();
    auto exe = backend->compile(*graph, {shape}, options);
    if (!exe) return fail(exe.status().toString());
    const double compile_s = seconds() - t0;

    Graph shaped = *graph;
    (void)shaped.inferShapes({shape});
    const double gflop = shaped.convFlops() / 1e9;

    std::vector<Tensor> outputs;
    std::vector<double> times;
    for (int r = 0; r < warmup + runs; ++r) {
        const double t = seconds();
        const auto s = (*exe)->run({input}, outputs);
        if (!s.isOk()) return fail(s.toString());
        if (r >= warmup) times.push_back(seconds() - t);
    }
    if (!output_path.empty()) {
        std::ofstream f(output_path, std::ios::binary);
        f.write(static_cast<const char*>(outputs[0].raw()),
                static_cast<std::streamsize>(outputs[0].bytes()));
    }
    double best = times.empty() ? 0 : times[0];
    for (double t : times) best = std::min(best, t);
    std::cerr << (*exe)->describe() << "\n"
              << "compile " << compile_s << " s, best run " << best << " s, " << gflop / best
              << " GFLOP/s, workspace " << ((*exe)->workspaceBytes() >> 20) << " MiB, peak RSS "
              << peakRssMiB() << " MiB\n";
    std::cout << "{\"times\": [";
    for (size_t i = 0; i < times.size(); ++i) std::cout << (i ? ", " : "") << times[i];
    std::cout << "], \"compile_s\": " << compile_s << ", \"gflop\": " << gflop
              << ", \"workspace_bytes\": " << (*exe)->workspaceBytes()
              << ", \"peak_rss_mib\": " << peakRssMiB() << "}\n";
    return 0;
}
