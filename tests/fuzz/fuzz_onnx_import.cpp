// libFuzzer target: an ONNX file as a model package's model.onnx is imported (protobuf parse,
// graph checks, constant folding and the import passes), from bytes, and the graph optimized.
#include "engine/graph/graph.h"
#include "engine/onnx/import.h"
#include "engine/passes/optimize.h"
#include "tests/fuzz/fuzz_support.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    // Folding bombs are refused at 256 MiB here, within libFuzzer's 2 GB memory limit (the
    // product's default, kMaxFoldedConstantBytes, admits real SwinUNETRs).
    voxseg::engine::OnnxImportOptions options;
    options.max_folded_bytes = uint64_t{256} << 20;
    auto graph = voxseg::engine::importOnnxBytes(
        std::string_view(reinterpret_cast<const char*>(data), size), options, "fuzz.onnx");
    // What every backend's compile() then does with an imported graph: optimize()'s rewrites.
    if (graph.isOk()) (void)voxseg::engine::optimize(*graph);
    return 0;
}
