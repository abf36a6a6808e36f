// ONNX import: reads an ONNX model (protobuf, opsets 9-21; 11-20 is what exporters emit for the
// supported networks) into voxseg's Graph.
//
// Every attribute is checked here; an op or attribute value voxseg cannot run is a kUnsupported
// error naming the node and the op. Shape-only subgraphs (Shape/Gather/Unsqueeze/Concat/Cast/...)
// are constant-folded for the static input shape, Dropout/Identity become Identity, PyTorch's
// GroupNorm pattern (Reshape -> InstanceNorm -> Reshape -> Mul -> Add) becomes one GroupNorm node,
// the spelled-out LayerNorm, GELU and SiLU of older exports become one node each, and every value
// gets its shape. Converters live in engine/onnx/, one per op family (converter.h). The result is
// not optimised: call optimize() for backends. Weights are copied into the Graph (no reference to
// the file remains). Thread-safe (no state).
#pragma once

#include "core/limits.h"
#include "core/status.h"
#include "engine/graph/graph.h"

#include <filesystem>
#include <string_view>
#include <vector>

namespace voxseg::engine {

struct OnnxImportOptions {
    // Static shapes of the graph inputs, in order (batch included). Empty: the model's declared
    // shapes, with a symbolic batch dim taken as 1; other symbolic dims are an error then.
    std::vector<Shape> input_shapes;
    // Resource limits (core/limits.h): a larger file is refused before it is read, a graph with
    // more nodes right after parsing.
    uint64_t max_file_bytes = readLimits().model_file_bytes;  // --max-model-bytes
    int64_t max_nodes = readLimits().graph_nodes;             // --max-graph-nodes
    // All constants folding computes, in bytes (refused beyond: a small file must not make the
    // importer allocate gigabytes).
    uint64_t max_folded_bytes = kMaxFoldedConstantBytes;
};

// Reads `path` (model.onnx). Errors: kNotFound / kIoError (file), kCorruptData (not a valid
// ONNX protobuf, dangling value names, inconsistent tensors), kUnsupported (op, attribute,
// opset, external tensor data), kInvalidArgument (shapes).
Result<Graph> importOnnx(const std::filesystem::path& path, const OnnxImportOptions& options = {});

// Same, from the serialized bytes; `subject` names the model in error messages.
Result<Graph> importOnnxBytes(std::string_view bytes, const OnnxImportOptions& options = {},
                              const std::string& subject = "<memory>");

}  // namespace voxseg::engine
