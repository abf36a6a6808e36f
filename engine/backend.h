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
#include "engine/activation_observer.h"
#include "engine/graph/graph.h"
#include "engine/graph/tensor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace voxseg::engine {

struct SlidingWindowOptions;  // engine/inference/window_geometry.h
class VolumeInference;        // engine/inference/sliding_window.h
struct QuantizationRecord;    // engine/quant/quantization_record.h

// Arithmetic a graph runs in. kAuto is a request only ("let the backend choose", resolved by
// choosePrecision below); compile() takes a resolved precision. kInt8: convolutions in int8 with
// the package's calibrated scales (CompileOptions::quantization, docs/int8.md), the rest fp32.
// kFp8: the same convolutions in FP8 (e4m3) from the same scales, on GPUs with FP8 tensor cores
// only (docs/int8-gpu.md); auto never picks it.
enum class Precision { kFloat32, kFloat16, kBFloat16, kAuto, kInt8, kFp8 };
const char* precisionName(Precision p);  // "fp32" | "fp16" | "bf16" | "auto" | "int8" | "fp8"
// "fp32" | "fp16" | "bf16" | "int8" | "fp8" | "auto" (also "float32", "float16", "bfloat16").
Result<Precision> parsePrecision(const std::string& name);
// Whether `p` runs on a package's calibration (CompileOptions::quantization): int8 and fp8.
bool usesCalibration(Precision p);

// A precision and the one-line reason it was chosen (logged and written to run.json).
struct PrecisionChoice {
    Precision precision = Precision::kFloat32;
    std::string reason;
};

// What the model says about precision (model.json "precision", docs/model-package.md).
struct ModelPrecisionHints {
    bool requires_fp32 = false;
    std::string reason;  // the model author's why (may be empty)
    std::string model;   // model name, for messages
    // The weight bits of an int8 calibration validated on held-back cases (model.json
    // "quantization" with "held_back"); 0 = none, and "auto" never picks int8.
    int int8_validated_weight_bits = 0;
};

struct CompileOptions {
    Precision precision = Precision::kFloat32;
    int num_threads = 0;   // CPU backends: 0 = all cores
    int device_index = 0;  // GPU backends
    // kInt8, kFp8: the package's calibration (activation scales by tensor name, float_layers,
    // weight_bits); required for them (usesCalibration), ignored otherwise.
    std::shared_ptr<const QuantizationRecord> quantization;
    // Named tensors handed to a callback during run() (engine/activation_observer.h).
    ActivationObserver observer;
    // kInt8 on the cpu backend: u8 sources written inside a halo of their zero point for
    // unpadded convolutions, and the first convolution on its kernel taps as channels
    // (quant::Int8Backend::halo_sources, Int8Layer::tap_channels; exact). false plans the padded
    // zero-point convolutions instead: for A/B timings and the tests that compare the two.
    bool int8_halo_sources = true;
    // cpu backend: the decoder's up-sampling folded into the convolution after its concat
    // (engine/passes/fold_upsampling.h; the same values up to float rounding, fewer
    // multiply-adds). false keeps the graph's ConvTranspose and Concat: for A/B timings and
    // the tests that compare the two.
    bool fold_upsampling = true;
    // cpu backend on AVX-512: a Conv with 8 output channels computed as one with 16 on pairs of
    // voxels along W (engine/cpu/conv_pairs.cpp; the same values up to float rounding). false:
    // for A/B timings and the tests that compare the two.
    bool pair_narrow_convs = true;
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
    // Gives the workspace's memory back to the system until the next run (which touches it
    // again): a staged package runs one network after another, and each would otherwise keep its
    // activations resident. The contents are scratch; the default keeps them.
    virtual void releaseWorkspace() {}
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
    // What "auto" means on this device, and why: the fastest precision whose results agree with
    // fp32 (docs/perf-cpu.md, "Precision"). Default: fp32.
    virtual PrecisionChoice autoPrecision() const;
    // Whether this device runs int8 weights of `weight_bits` exactly (cpu: cpuInt8Support);
    // default: kUnsupported, the backend has no int8.
    virtual Status supportsInt8Weights(int weight_bits) const;

    // Whether compile() lowers `node` of `graph` (op, attributes, and the shapes recorded in
    // graph.values): ok, or kUnsupported naming the node, the op and the reason. A backend that
    // says ok here and then refuses the node in compile() has a bug (the parity tests rely on
    // it). Default: every op (the reference and cpu backends run the whole op set).
    virtual Status supportsNode(const Graph& graph, const Node& node) const;
    bool supports(const Graph& graph, const Node& node) const {
        return supportsNode(graph, node).isOk();
    }
    // The first node of `graph`, shaped for `input_shapes` (Graph::inferShapes on a copy), that
    // supportsNode() refuses, or ok.
    Status supportsGraph(const Graph& graph, const std::vector<Shape>& input_shapes) const;

    // Compiles `graph` for the given input shapes (dim 0 = batch). An op, attribute or precision
    // the backend cannot run is an error naming the node and op, never a silent fallback.
    virtual Result<std::unique_ptr<CompiledGraph>> compile(const Graph& graph,
                                                           const std::vector<Shape>& input_shapes,
                                                           const CompileOptions& options) = 0;

    // The sliding window that runs whole volumes of `graphs` (an ensemble, averaged per patch)
    // on this backend. Default: the host SlidingWindow (engine/inference/sliding_window.h) over
    // graphs this backend compiles. A backend with a faster whole-volume path (cuda: patches never
    // leave the GPU) overrides it; the result is the same weighted mean of logits.
    virtual Result<std::unique_ptr<VolumeInference>> makeSlidingWindow(
        const std::vector<const Graph*>& graphs, int64_t channels,
        const SlidingWindowOptions& options);
};

// The one precision policy: `requested` (kAuto or explicit) on `backend` for a model.
// kAuto: fp32 when the model requires it; int8 when the package records a validated calibration
// whose weight bits the backend runs exactly (supportsInt8Weights); else backend.autoPrecision(),
// its reason saying why int8 was not taken where a calibration exists. Explicit: must be
// supported (else kUnsupported saying to use fp32); a non-fp32 request for a model that requires
// fp32 runs as asked, with a line in `warning`.
Result<PrecisionChoice> choosePrecision(const Backend& backend, Precision requested,
                                        const ModelPrecisionHints& model,
                                        std::string* warning = nullptr);

// The plain-loop oracle (engine/reference/reference_backend.cpp).
std::unique_ptr<Backend> makeReferenceBackend();

}  // namespace voxseg::engine
