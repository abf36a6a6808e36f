// The oneDNN CPU Backend: device query, precision support, and compile(): optimize(), shape
// inference for the requested input shapes, one planning pass over the nodes (cpu_*.cpp per
// op family), then memory planning (cpu_plan.cpp).
#include "engine/cpu/cpu_backend.h"

#include "core/memory_limit.h"
#include "engine/cpu/observe.h"
#include "engine/cpu/plan.h"
#include "engine/passes/fold_upsampling.h"
#include "engine/passes/optimize.h"
#include "engine/quant/int8_policy.h"
#include "engine/quant/int8_scheme.h"
#include "engine/quant/quantization_record.h"

#include <omp.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace voxseg::engine {
namespace {

using cpu::Plan;

using cpu::cpuHasAmx;
using cpu::cpuHasBf16;

// CPUID leaf 0's vendor string is "AuthenticAMD".
bool cpuIsAmd() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
    char vendor[13] = {};
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    return std::string(vendor) == "AuthenticAMD";
#else
    return false;
#endif
}

std::string cpuModel() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("model name", 0) == 0) {
            const auto pos = line.find(':');
            if (pos != std::string::npos) return line.substr(pos + 2);
        }
    }
    return "CPU";
}

const char* isaName() {
    switch (dnnl::get_effective_cpu_isa()) {
        case dnnl::cpu_isa::avx512_core_amx:
            return "avx512_core_amx";
        case dnnl::cpu_isa::avx512_core_bf16:
            return "avx512_core_bf16";
        case dnnl::cpu_isa::avx512_core_vnni:
            return "avx512_core_vnni";
        case dnnl::cpu_isa::avx512_core:
            return "avx512_core";
        case dnnl::cpu_isa::avx2_vnni:
            return "avx2_vnni";
        case dnnl::cpu_isa::avx2:
            return "avx2";
        default:
            return "sse41/avx";
    }
}

void applyThreads(int num_threads) {
    if (num_threads > 0) omp_set_num_threads(num_threads);
}

Status planNode(Plan& plan) {
    switch (plan.node().op) {
        case OpKind::kConv:
            return cpu::planConv(plan);
        case OpKind::kConvTranspose:
            return cpu::planConvTranspose(plan);
        case OpKind::kSubpixelAdd:
            return cpu::planSubpixelAdd(plan);
        case OpKind::kInstanceNorm:
        case OpKind::kGroupNorm:
        case OpKind::kBatchNorm:
        case OpKind::kChannelLayerNorm:
            return cpu::planNorm(plan);
        case OpKind::kRelu:
        case OpKind::kLeakyRelu:
        case OpKind::kPRelu:
        case OpKind::kSigmoid:
        case OpKind::kTanh:
        case OpKind::kClip:
        case OpKind::kGelu:
        case OpKind::kSilu:
        case OpKind::kSqrt:
            return cpu::planEltwise(plan);
        case OpKind::kSoftmax:
            return cpu::planSoftmax(plan);
        case OpKind::kAdd:
        case OpKind::kSub:
        case OpKind::kMul:
        case OpKind::kDiv:
            return cpu::planBinary(plan);
        case OpKind::kConcat:
            return cpu::planConcat(plan);
        case OpKind::kWhere:
            return cpu::planWhere(plan);
        case OpKind::kLayerNorm:
            return cpu::planLayerNorm(plan);
        case OpKind::kReduceMean:
        case OpKind::kReduceSum:
        case OpKind::kReduceMax:
            return cpu::planReduce(plan);
        case OpKind::kMatMul:
            return cpu::planMatMul(plan);
        case OpKind::kExpand:
        case OpKind::kTile:
            return cpu::planExpandOrTile(plan);
        case OpKind::kAttention:
        case OpKind::kMultiHeadAttention:
            return cpu::planAttention(plan);
        case OpKind::kRotary:
            return cpu::planRotary(plan);
        case OpKind::kResize:
            return cpu::planResize(plan);
        case OpKind::kMaxPool:
        case OpKind::kAveragePool:
        case OpKind::kGlobalAveragePool:
            return cpu::planPool(plan);
        case OpKind::kPad:
        case OpKind::kIdentity:
        case OpKind::kReshape:
        case OpKind::kTranspose:
        case OpKind::kSlice:
        case OpKind::kRoll:
            return cpu::planShapeOp(plan);
        default:
            break;
    }
    // Unary ops without a oneDNN eltwise mapping above: the shared formula in a plain loop.
    if (unaryFnOf(plan.node().op)) return cpu::planPlainUnary(plan);
    return cpu::nodeError(plan, "op not supported by the cpu backend");
}

class CpuCompiledGraph : public CompiledGraph {
  public:
    CpuCompiledGraph(Graph graph, const CompileOptions& options)
        : graph_(std::move(graph)),
          precision_(options.precision),
          num_threads_(options.num_threads),
          observer_(options.observer),
          engine_(dnnl::engine::kind::cpu, 0),
          plan_(graph_, engine_, options.precision) {
        plan_.setPairNarrowConvs(options.pair_narrow_convs);
        if (options.precision == Precision::kInt8 && options.quantization) {
            int8_layers_ = quant::int8LayerPlan(graph_, *options.quantization,
                                                {/*upsampling=*/true, options.int8_halo_sources});
            weight_qmax_ = quant::weightQmaxForBits(options.quantization->weight_bits);
            plan_.setInt8Layers(&int8_layers_);
            if (cpuInt8FloatPrecision() == Precision::kBFloat16) plan_.setActType(cpu::dt::bf16);
        }
    }

    Status build(const std::vector<Shape>& input_shapes) {
        input_shapes_ = input_shapes;
        for (ValueId v : graph_.outputs) output_shapes_.push_back(graph_.values[v].shape);
        VOXSEG_RETURN_IF_ERROR(checkActivationsFitMemory());
        VOXSEG_ASSIGN_OR_RETURN(const std::vector<bool> observed,
                                cpu::observedValues(graph_, observer_));
        plan_.defineInputs(input_shapes);
        for (ValueId v : graph_.inputs)
            if (observed[v]) VOXSEG_RETURN_IF_ERROR(cpu::planObserve(plan_, v, observer_.callback));
        for (size_t i = 0; i < graph_.nodes.size(); ++i) {
            plan_.setCurrentNode(static_cast<int>(i));
            Status s;
            try {
                const quant::Int8Layer* q8 = i < int8_layers_.size() ? &int8_layers_[i] : nullptr;
                s = q8 && q8->int8            ? cpu::planInt8Conv(plan_, *q8, weight_qmax_)
                    : q8 && q8->int8_upsample ? cpu::planInt8Upsampling(plan_, *q8, weight_qmax_)
                                              : planNode(plan_);
                for (ValueId v : graph_.nodes[i].outputs)
                    if (s.isOk() && v >= 0 && observed[v])
                        s = cpu::planObserve(plan_, v, observer_.callback);
            } catch (const dnnl::error& e) {
                s = cpu::nodeError(plan_, std::string("oneDNN: ") + e.what());
            }
            if (!s.isOk()) return withTensorSizeHint(s, graph_.nodes[i]);
        }
        VOXSEG_RETURN_IF_ERROR(plan_.defineOutputs());
        VOXSEG_RETURN_IF_ERROR(plan_.finish());
        releaseConstants();
        return Status::ok();
    }

    // The plan holds what it reads of the constants (reordered once into its kernels' layouts,
    // or copied into their closures); the graph's own are not read after build(). Dropping them
    // frees a model's weights once the caller's graph is gone too (a Segmenter keeps only the
    // compiled networks): otherwise every network's weights stay resident twice (0.6 GB for
    // TotalSegmentator's five part networks, docs/perf-totalseg.md).
    void releaseConstants() {
        for (Value& value : graph_.values)
            if (value.constant) *value.constant = Tensor();
    }

    // A computed value's bytes. inferShapes() bounds every value to 2^40 elements, so this
    // cannot overflow.
    uint64_t valueBytes(ValueId v) const {
        const Value& value = graph_.values[v];
        return static_cast<uint64_t>(numel(value.shape)) * dtypeSize(value.dtype);
    }

    // oneDNN 2.6 creates no primitive for some tensors past 2 GiB where the CPU lacks AVX-512
    // (a 16-channel 490^3 activation under DNNL_MAX_CPU_ISA=AVX2 fits the memory and is refused):
    // such a failure names the size and the way out instead of reading as an unsupported op.
    Status withTensorSizeHint(const Status& s, const Node& node) const {
        if (s.message().find("oneDNN") == std::string::npos) return s;
        uint64_t largest = 0;
        for (const std::vector<ValueId>* ids : {&node.inputs, &node.outputs})
            for (ValueId v : *ids)
                if (v >= 0 && !graph_.values[v].constant)
                    largest = std::max(largest, valueBytes(v));
        if (largest <= (uint64_t{1} << 31)) return s;
        return Status(s.code(),
                      s.message() + " (a tensor of " + std::to_string(largest >> 20) +
                          " MiB: oneDNN has no kernel for tensors this large on this CPU, " +
                          isaName() + "; use a smaller patch)",
                      s.subject());
    }

    // An activation larger than the memory this process may use (core/memory_limit.h) can never
    // be allocated. Refused here, before oneDNN plans a kernel for it, so that every CPU gives the
    // same advice: under AVX2 oneDNN cannot create primitives for tensors this large, which read
    // as an unsupported op.
    Status checkActivationsFitMemory() const {
        const uint64_t memory = memoryLimitBytes();
        if (memory == 0) return Status::ok();
        for (const Node& node : graph_.nodes)
            for (ValueId v : node.outputs) {
                if (v < 0 || valueBytes(v) <= memory) continue;
                const Value& value = graph_.values[v];
                return Status(StatusCode::kOutOfMemory,
                              "cpu backend: '" + value.name + "' " + shapeToString(value.shape) +
                                  " needs " + std::to_string(valueBytes(v) >> 20) +
                                  " MiB, more than the " + describeMemoryLimit() +
                                  "; use a smaller patch or batch");
            }
        return Status::ok();
    }

    const std::vector<Shape>& inputShapes() const override { return input_shapes_; }
    const std::vector<Shape>& outputShapes() const override { return output_shapes_; }

    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
        if (inputs.size() != input_shapes_.size())
            return invalidArgument("cpu backend: expected " + std::to_string(input_shapes_.size()) +
                                   " inputs, got " + std::to_string(inputs.size()));
        for (size_t i = 0; i < inputs.size(); ++i) {
            if (inputs[i].dtype() != DType::kFloat32 || inputs[i].shape() != input_shapes_[i])
                return invalidArgument("cpu backend: input " + std::to_string(i) + " is " +
                                       dtypeName(inputs[i].dtype()) + " " +
                                       shapeToString(inputs[i].shape()) +
                                       ", compiled for float32 " + shapeToString(input_shapes_[i]));
        }
        applyThreads(num_threads_);
        return plan_.run(inputs, outputs, output_shapes_);
    }

    size_t workspaceBytes() const override { return plan_.workspaceBytes(); }
    void releaseWorkspace() override { plan_.releaseWorkspace(); }

    std::string describe() const override {
        std::ostringstream os;
        os << "cpu (oneDNN " << dnnl_version()->major << "." << dnnl_version()->minor << ", "
           << isaName() << ", " << precisionName(precision_) << ", "
           << (num_threads_ > 0 ? num_threads_ : omp_get_max_threads())
           << " threads): " << plan_.steps().size() << " steps, arena "
           << (plan_.arenaBytes() >> 20) << " MiB;";
        for (const auto& s : plan_.steps()) os << " [" << s.node << ": " << s.what << "]";
        for (const auto& [node, what] : plan_.notes()) os << " [" << node << ": " << what << "]";
        return os.str();
    }

  private:
    Graph graph_;
    Precision precision_;
    int num_threads_;
    ActivationObserver observer_;
    std::vector<quant::Int8Layer> int8_layers_;  // kInt8: per node (int8_policy.h)
    int weight_qmax_ = quant::kWeightQmaxVnni;
    std::vector<Shape> input_shapes_, output_shapes_;
    dnnl::engine engine_;
    Plan plan_;
};

class CpuBackend : public Backend {
  public:
    std::string name() const override { return "cpu"; }

    std::string deviceDescription() const override {
        return cpuModel() + " (" + isaName() + "), " + std::to_string(omp_get_max_threads()) +
               " threads";
    }

    bool supportsPrecision(Precision precision) const override {
        if (precision == Precision::kFloat32) return true;
        if (precision == Precision::kBFloat16) return cpuHasBf16();
        // oneDNN's int8 kernels run on every x86 CPU; whether this CPU runs a given package's
        // weights exactly is cpuInt8Support's question, asked by compile().
        if (precision == Precision::kInt8) return true;
        return false;
    }

    // kInt8's own checks: a record, weight bits this CPU multiplies exactly, no observer.
    static Status checkInt8(const CompileOptions& options) {
        if (options.precision != Precision::kInt8) return Status::ok();
        if (!options.quantization)
            return invalidArgument(
                "cpu backend: precision int8 needs the package's int8 calibration "
                "(CompileOptions::quantization, model.json \"quantization\"; docs/int8.md)");
        VOXSEG_RETURN_IF_ERROR(cpuInt8Support(cpuInt8Traits(), options.quantization->weight_bits));
        if (options.observer.active())
            return unsupported(
                "cpu backend: activation observers run in fp32 or bf16, not int8 (int8 tensors "
                "are u8 between int8 convolutions); observe an fp32 compile");
        return Status::ok();
    }

    Status supportsInt8Weights(int weight_bits) const override {
        return cpuInt8Support(cpuInt8Traits(), weight_bits);
    }

    PrecisionChoice autoPrecision() const override {
        return cpuAutoPrecision({cpuHasAmx(), cpuHasBf16(), cpuIsAmd()});
    }

    Result<std::unique_ptr<CompiledGraph>> compile(const Graph& graph,
                                                   const std::vector<Shape>& input_shapes,
                                                   const CompileOptions& options) override {
        if (options.precision == Precision::kAuto)
            return invalidArgument(
                "cpu backend: precision auto must be resolved first "
                "(engine::choosePrecision)");
        if (!supportsPrecision(options.precision))
            return unsupported(std::string("cpu backend: precision ") +
                               precisionName(options.precision) + " is not supported on this " +
                               "CPU (" + isaName() + "); use fp32" +
                               (options.precision == Precision::kFloat16 ? " or bf16" : ""));
        VOXSEG_RETURN_IF_ERROR(checkInt8(options));
        if (input_shapes.size() != graph.inputs.size())
            return invalidArgument("cpu backend: graph has " + std::to_string(graph.inputs.size()) +
                                   " inputs, " + std::to_string(input_shapes.size()) +
                                   " shapes given");
        applyThreads(options.num_threads);
        Graph g = optimize(graph);
        VOXSEG_RETURN_IF_ERROR(g.inferShapes(input_shapes));
        // Observers name the unfolded graph's tensors (the concat a calibration observes).
        if (options.fold_upsampling && !options.observer.active() && passes::foldUpsampling(g) > 0)
            VOXSEG_RETURN_IF_ERROR(g.inferShapes(input_shapes));
        auto compiled = std::make_unique<CpuCompiledGraph>(std::move(g), options);
        VOXSEG_RETURN_IF_ERROR(compiled->build(input_shapes));
        return std::unique_ptr<CompiledGraph>(std::move(compiled));
    }
};

}  // namespace

PrecisionChoice cpuAutoPrecision(const CpuBf16Traits& cpu) {
    if (cpu.amx_bf16)
        return {Precision::kBFloat16,
                "cpu has AMX (amx_bf16): bf16 convolutions run about 3x faster than fp32 and the "
                "labels agree (docs/perf-cpu.md, \"Precision\")"};
    if (cpu.avx512_bf16 && cpu.amd)
        return {Precision::kBFloat16,
                "cpu is an AMD with avx512_bf16 (Zen 4 or later): bf16 measured 1.5-1.9x faster "
                "than fp32 and the labels agree (docs/perf-cpu.md, \"Precision\")"};
    if (cpu.avx512_bf16)
        return {Precision::kFloat32,
                "cpu has avx512_bf16 but no AMX (Intel): bf16 measured slower than fp32 there "
                "(docs/perf-cpu.md); --precision bf16 still runs it"};
    return {Precision::kFloat32, "cpu has no bf16 instructions (no AMX, no avx512_bf16)"};
}

Precision cpuInt8FloatPrecision(const CpuBf16Traits& cpu) {
    return cpuAutoPrecision(cpu).precision;
}

Precision cpuInt8FloatPrecision() {
    return cpuInt8FloatPrecision({cpuHasAmx(), cpuHasBf16(), cpuIsAmd()});
}

CpuInt8Traits cpuInt8Traits() {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    auto has = [isa](dnnl_cpu_isa_t want) {
        return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
    };
    return {has(dnnl_cpu_isa_avx512_core_vnni), has(dnnl_cpu_isa_avx2_vnni),
            has(dnnl_cpu_isa_avx512_core_amx)};
}

int cpuInt8WeightBits(const CpuInt8Traits& cpu) {
    return cpu.avx512_vnni || cpu.avx_vnni || cpu.amx_int8 ? 8 : 7;
}

int cpuInt8WeightQmax(const CpuInt8Traits& cpu) {
    return quant::weightQmaxForBits(cpuInt8WeightBits(cpu));
}

Status cpuInt8Support(const CpuInt8Traits& cpu, int weight_bits) {
    if (weight_bits < 2 || weight_bits > 8)
        return invalidArgument("cpu backend: int8 weights of " + std::to_string(weight_bits) +
                               " bits: the package's quantization.weight_bits must be 7 or 8");
    if (weight_bits <= cpuInt8WeightBits(cpu)) return Status::ok();
    return unsupported(
        "cpu backend: this package's int8 calibration validated " + std::to_string(weight_bits) +
        "-bit weights, and this CPU multiplies only 7-bit weights exactly: it has no VNNI dot "
        "products (avx512_vnni, avx_vnni) or AMX (amx_int8), and its int8 kernels add products "
        "in saturating 16-bit pairs (docs/int8.md); recalibrate on this CPU or with "
        "--weight-bits 7, or use --precision fp32 (bf16 where the CPU has avx512_bf16)");
}

std::unique_ptr<Backend> makeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace voxseg::engine
