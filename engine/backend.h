// Backend: the contract between the engine and the hardware that runs a Graph.
//
// A backend compiles a whole Graph for one input shape (batch included) into a CompiledGraph,
// which it may fuse, re-layout and memory-plan as it likes, then runs it many times (one call per
// batch of patches). Backends only compute: attributes and shapes were checked by the importer.
// The reference backend (plain loops) is the oracle every other backend is tested against.
//
// Thread safety: a Backend may be shared; a CompiledGraph is used by one thread at a time.
// Units: all host tensors are float32, row-major NCDHW.
#pragma once

#include "core/status.h"
#include "engine/graph.h"
#include "engine/tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace voxseg::engine {

enum class Precision { kFloat32, kFloat16, kBFloat16 };
const char* precisionName(Precision p);
Result<Precision> parsePrecision(const std::string& name);  // "fp32" | "fp16" | "bf16"

struct CompileOptions {
    Precision precision = Precision::kFloat32;
    int num_threads = 0;   // CPU backends: 0 = all cores
    int device_index = 0;  // GPU backends
};

class CompiledGraph {
  public:
    virtual ~CompiledGraph() = default;

    // Shapes this executable was compiled for (inputs() / outputs() of the graph, in order).
    virtual const std::vector<Shape>& inputShapes() const = 0;
    virtual const std::vector<Shape>& outputShapes() const = 0;

    // Runs the graph: `inputs` must match inputShapes(); `outputs` are (re)allocated as float32
    // host tensors of outputShapes(). Errors name the node that failed.
    virtual Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) = 0;

    // Bytes of intermediate activations and workspace held by this executable (memory report).
    virtual size_t workspaceBytes() const = 0;
    // One line for logs: kernels chosen, layout, precision.
    virtual std::string describe() const = 0;
};

class Backend {
  public:
    virtual ~Backend() = default;

    // "reference", "cpu", "cuda".
    virtual std::string name() const = 0;
    // Human-readable device: "AMD EPYC (avx512_core_bf16), 2 threads", "NVIDIA H200 (sm_90)".
    virtual std::string deviceDescription() const = 0;
    virtual bool supportsPrecision(Precision precision) const = 0;

    // Compiles `graph` for the given input shapes (dim 0 = batch). An op, attribute or precision
    // the backend cannot run is an error naming the node and op, never a silent fallback.
    virtual Result<std::unique_ptr<CompiledGraph>> compile(const Graph& graph,
                                                           const std::vector<Shape>& input_shapes,
                                                           const CompileOptions& options) = 0;
};

// The plain-loop oracle (engine/reference_backend.cpp).
std::unique_ptr<Backend> makeReferenceBackend();

}  // namespace voxseg::engine
