// Internal to the oneDNN CPU backend (not a public header): the compile-time plan that the
// per-op builders (one file per op family: conv.cpp, norm.cpp, elementwise.cpp, reduce.cpp,
// matmul.cpp, pool.cpp, resize.cpp, shape_ops.cpp, attention.cpp) fill with steps, and the
// executable it becomes.
//
// Every non-constant value lives in a Buffer with a oneDNN memory descriptor (its layout and
// data type). Builders ask for a value in the layout they need (ensure(): a reorder step only
// when it differs), create their output in the layout their primitive chose, and may write in
// place over an input that dies at their node. finish() computes buffer lifetimes from the
// steps, packs them into one arena (cpu_memory_plan.cpp) and binds oneDNN memory objects.
// Single-threaded; owned by one compile() call, then by the CompiledGraph.
#pragma once

#include "core/status.h"
#include "engine/backend.h"
#include "engine/graph/graph.h"
#include "engine/quant/int8_policy.h"

#include <dnnl.hpp>

#include <array>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace voxseg::engine::cpu {

class Int8Conv;  // conv_int8.h

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Where a tensor lives during a run: an arena/external buffer, or a fixed (constant) memory.
struct MemRef {
    int buffer = -1;  // index into Plan::buffers_; -1 means `fixed`
    dnnl::memory::desc md;
    dnnl::memory fixed;
};

struct Buffer {
    size_t bytes = 0;
    int input_index = -1;   // bound at run time to the caller's input tensor
    int output_index = -1;  // bound at run time to the caller's output tensor
    size_t offset = 0;      // in the arena (internal buffers)
    int first_step = -1, last_step = -1;
    // A view: these bytes are [parent_offset, parent_offset + bytes) of buffer `parent` (a
    // Concat's input written straight into its part of the output). Its parent has a higher
    // index and lives at least as long.
    int parent = -1;
    size_t parent_offset = 0;
};

// Custom kernels receive the memories of their refs, in order, bound for this run.
using Kernel = std::function<void(const std::vector<dnnl::memory>&)>;

struct Step {
    std::string node;  // node name (errors)
    std::string what;  // op and implementation (describe())
    std::optional<dnnl::primitive> prim;
    std::vector<std::pair<int, MemRef>> args;  // (DNNL_ARG_*, ref) or (index, ref) for kernels
    Kernel kernel;
    bool scratchpad = false;
    // Bound by finish():
    std::unordered_map<int, dnnl::memory> exec_args;
    std::vector<dnnl::memory> mems;
};

// `dims` in the same layout family as `like` (ndhwc, nCdhw16c, ...); plain when unknown.
// ndhwc / nhwc.
bool isChannelsLast(const dnnl::memory::desc& md);
dnnl::memory::desc sameLayout(const dnnl::memory::desc& like, const dnnl::memory::dims& dims,
                              dt type);

// Plain (row-major) descriptor of a shape.
dnnl::memory::desc plainDesc(const Shape& shape, dt type);
dnnl::memory::dims toDims(const Shape& shape);
// "nCdhw16c:bf16"-like text for describe().
std::string descName(const dnnl::memory::desc& md);
size_t alignUp(size_t n, size_t a);
// What oneDNN runs on this CPU: avx512_bf16 instructions; AMX tiles with bf16 (amx_bf16, the OS
// granted the tile state).
bool cpuHasBf16();
bool cpuHasAmx();

// Greedy best-fit offsets for buffers with sizes and [first, last] step intervals: buffers whose
// intervals overlap never overlap in memory. Returns the arena size.
size_t planArenaOffsets(const std::vector<size_t>& bytes,
                        const std::vector<std::pair<int, int>>& lifetimes, size_t alignment,
                        std::vector<size_t>& offsets);

class Plan {
  public:
    Plan(const Graph& graph, dnnl::engine engine, Precision precision);

    const Graph& graph() const { return graph_; }
    const dnnl::engine& engine() const { return engine_; }
    Precision precision() const { return precision_; }
    // Data type of activations (f32 or bf16).
    dt actType() const { return act_type_; }
    // kInt8 plans: the type of their float tensors (cpuInt8FloatPrecision; f32 by default).
    void setActType(dt type) { act_type_ = type; }

    // Conv with 8 output channels planned on voxel pairs (conv_pairs.cpp;
    // CompileOptions::pair_narrow_convs).
    void setPairNarrowConvs(bool on) { pair_narrow_convs_ = on; }
    bool pairNarrowConvs() const { return pair_narrow_convs_; }

    // Index of the node being planned (set by the compile loop).
    void setCurrentNode(int index) { current_node_ = index; }
    const Node& node() const {
        static const Node kNone{};
        return current_node_ < static_cast<int>(graph_.nodes.size()) ? graph_.nodes[current_node_]
                                                                     : kNone;
    }

    bool has(ValueId v) const { return refs_.count(v) > 0; }
    const MemRef& ref(ValueId v) const { return refs_.at(v); }
    const dnnl::memory::desc& desc(ValueId v) const { return refs_.at(v).md; }

    // The value `v` (activation or constant) in layout `md`: its own buffer when the layout
    // matches, else a converted copy (a reorder step, cached per value and layout).
    Result<MemRef> ensure(ValueId v, const dnnl::memory::desc& md);
    // The value in plain f32 layout (custom kernels that only handle that).
    Result<MemRef> ensurePlainF32(ValueId v);
    // The value as u8 in layout `u8_md`, quantised with `q` (int8 convolutions): a quantising
    // reorder of a float value (cached per value and layout), or a layout reorder of a value
    // that is u8 already (written with `q` by an int8 convolution).
    Result<MemRef> ensureQuantized(ValueId v, const dnnl::memory::desc& u8_md,
                                   const quant::ActivationQuant& q);
    // Records `u8`, value `v` quantised by the node that computed it (a normalisation writing
    // its int8 readers' source, engine/quant/int8_policy.h): ensureQuantized() returns it for
    // its layout.
    void defineQuantized(ValueId v, const MemRef& u8);
    // The u8 a normalisation wrote for the quantising concat that reads `v` (int8_policy.h,
    // concat_u8), in the concat's scale and zero point; null when there is none.
    void defineConcatU8(ValueId v, const MemRef& u8) { concat_u8_[v] = u8; }
    const MemRef* concatU8(ValueId v) const {
        const auto it = concat_u8_.find(v);
        return it == concat_u8_.end() ? nullptr : &it->second;
    }
    // The quantising concat's u8 output `cat` that the node computing `v` (a ConvTranspose,
    // int8_policy.h concat_u8) wrote its channels of in place: the concat writes its other inputs
    // into it and needs no float form of `v`. Null when there is none.
    void defineConcatInPlace(ValueId v, const MemRef& cat) { concat_in_place_[v] = cat; }
    const MemRef* concatInPlace(ValueId v) const {
        const auto it = concat_in_place_.find(v);
        return it == concat_in_place_.end() ? nullptr : &it->second;
    }
    // The layout of a u8 form of `v` already planned (its own, or defineQuantized's), or an
    // empty desc: int8 convolutions take it when their implementation does.
    dnnl::memory::desc quantizedDesc(ValueId v) const;
    // kInt8 plans: the int8 layer plan of the graph (one entry per node), and the current
    // node's entry (null without a plan).
    void setInt8Layers(const std::vector<quant::Int8Layer>* layers) { int8_layers_ = layers; }
    const quant::Int8Layer* int8Layer() const;
    // Node `node`'s entry (null without a plan).
    const quant::Int8Layer* int8LayerOf(int node) const;
    // A constant reordered once, at compile time, into `md` (weights, biases, slopes).
    Result<dnnl::memory> constantMemory(ValueId v, const dnnl::memory::desc& md);
    Result<dnnl::memory> constantMemory(const Tensor& t, const dnnl::memory::desc& src_md,
                                        const dnnl::memory::desc& md);

    // A new internal buffer for `md`.
    MemRef newBuffer(const dnnl::memory::desc& md);
    // The buffer of `input` reused for an output of layout `md` when the input dies at the
    // current node, is not a graph input or output, and has the same size; else nullopt.
    std::optional<MemRef> tryInPlace(ValueId input, const dnnl::memory::desc& md);
    // Records where value `v` now lives.
    void define(ValueId v, const MemRef& r) { refs_[v] = r; }
    // Whether `r`, where value `v` lives, can become a view into a buffer created at this node:
    // `v` dies here, `r` is an internal buffer of exactly `bytes` and not a view already.
    bool canBecomeView(ValueId v, const MemRef& r, size_t bytes) const;
    // Makes buffer `child` the bytes of `parent` from `byte_offset` on, for its whole life:
    // every step that wrote or read it uses that part of the parent instead.
    void makeView(int child, int parent, size_t byte_offset);
    // Host data a kernel derives from constants at compile time (the Rotary's one-head tables),
    // made once per key and shared by every node that asks for it.
    template <typename T, typename Make>
    std::shared_ptr<const T> derivedConstant(const std::string& key, Make make) {
        std::shared_ptr<const void>& slot = derived_[key];
        if (!slot) slot = std::make_shared<const T>(make());
        return std::static_pointer_cast<const T>(slot);
    }
    // Work a node needs no step for ("concat in place"), listed by describe().
    void addNote(const std::string& what) { notes_.emplace_back(node().name, what); }
    const std::vector<std::pair<std::string, std::string>>& notes() const { return notes_; }

    void addPrimitive(const std::string& what, dnnl::primitive prim,
                      std::vector<std::pair<int, MemRef>> args,
                      const dnnl::memory::desc& scratchpad_md);
    void addKernel(const std::string& what, Kernel kernel, std::vector<MemRef> refs);
    // dst <- src with a reorder (layout or type conversion, or a plain copy).
    Status addCopy(const MemRef& src, const MemRef& dst);

    // Planning of graph inputs (before the node loop) and outputs (after it).
    void defineInputs(const std::vector<Shape>& shapes);
    Status defineOutputs();

    // Lifetimes, arena offsets, memory binding. After this the plan is executable.
    Status finish();

    // Runs every step; inputs/outputs bound to the callers' tensors.
    Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
               const std::vector<Shape>& output_shapes);

    size_t workspaceBytes() const { return arena_bytes_ + scratchpad_bytes_; }
    // madvise(MADV_DONTNEED) on the arena's and scratchpad's whole pages: resident memory drops
    // to zero for them until the next run faults them in again (zeroed; both are scratch).
    void releaseWorkspace();
    const std::vector<Step>& steps() const { return steps_; }
    size_t arenaBytes() const { return arena_bytes_; }

  private:
    bool diesHere(ValueId v) const;
    // A u8 form of `v` in any layout (ensureQuantized's or defineQuantized's), or null.
    const MemRef* anyQuantized(ValueId v) const;
    dnnl::memory bind(const MemRef& r);

    const Graph& graph_;
    dnnl::engine engine_;
    dnnl::stream compile_stream_;
    Precision precision_;
    dt act_type_;
    bool pair_narrow_convs_ = true;
    int current_node_ = 0;
    std::vector<int> last_use_;  // per value: index of the last node reading it (INT_MAX: output)
    std::unordered_map<ValueId, MemRef> refs_;
    std::map<std::pair<ValueId, std::string>, MemRef> converted_;
    std::map<std::pair<ValueId, std::string>, MemRef> quantized_;  // ensureQuantized()
    std::unordered_map<ValueId, MemRef> concat_u8_;                // defineConcatU8()
    std::unordered_map<ValueId, MemRef> concat_in_place_;          // defineConcatInPlace()
    const std::vector<quant::Int8Layer>* int8_layers_ = nullptr;
    // Constants already reordered, per value and layout (read-only: nodes that share a constant,
    // such as the Rotary tables of every block after the head fold, share its memory).
    std::map<std::pair<ValueId, std::string>, dnnl::memory> constants_;
    std::map<std::string, std::shared_ptr<const void>> derived_;  // derivedConstant()
    std::vector<Buffer> buffers_;
    std::vector<Step> steps_;
    std::vector<std::pair<std::string, std::string>> notes_;  // (node, what)
    bool profile_ = false;      // VOXSEG_CPU_PROFILE=1: per-step times in the log
    bool profile_all_ = false;  // VOXSEG_CPU_PROFILE=all: every step's, not the slowest 12
    std::vector<double> step_seconds_, step_cpu_seconds_;
    size_t scratchpad_bytes_ = 0;
    size_t arena_bytes_ = 0;
    std::shared_ptr<std::byte> arena_;
    std::shared_ptr<std::byte> scratchpad_;
    dnnl::memory scratchpad_mem_;
    std::vector<int> output_buffers_;
    // (memory, input index or -(output index + 1)) to rebind per run.
    std::vector<std::pair<dnnl::memory, int>> externals_;
};

// Per-op builders, one file per op family. Each plans the current node of `plan`.
// conv.cpp
Status planConv(Plan& plan);  // Conv (with fused bias/activation/residual)
// A Conv of 8 output channels as 16 on voxel pairs along W (conv_pairs.cpp): where it applies,
// and the plan; planConv calls them.
bool pairedConvApplies(const Plan& plan);
Status planPairedConv(Plan& plan);
// conv_int8_plan.cpp: a Conv as an int8 convolution (engine/quant/int8_policy.h decides which),
// its weights quantised to +-`weight_qmax` per output channel.
Status planInt8Conv(Plan& plan, const quant::Int8Layer& layer, int weight_qmax);
// The step running `conv` from `src` to `dst`, named `name`; the plan keeps `conv` alive.
void addInt8ConvStep(Plan& plan, const Int8Conv& conv, const MemRef& src, const MemRef& dst,
                     const std::string& name);
// conv.cpp: a k = s ConvTranspose the int8 layer plan runs in int8 (int8_upsample).
Status planInt8Upsampling(Plan& plan, const quant::Int8Layer& layer, int weight_qmax);
// ConvTranspose; `subpixel`: kernel == stride as a 1x1 conv + scatter, else oneDNN's
// deconvolution.
Status planConvTranspose(Plan& plan, bool subpixel = true);
// SubpixelAdd (op_kind.h): the folded up-sampling's parities into the skip convolution's result.
Status planSubpixelAdd(Plan& plan);
// norm.cpp
Status planNorm(Plan& plan);  // InstanceNorm, GroupNorm, ChannelLayerNorm (own kernels), BatchNorm
Status planLayerNorm(Plan& plan);
// elementwise.cpp
Status planEltwise(Plan& plan);  // Relu, LeakyRelu, Sigmoid, Tanh, Clip, PRelu, Gelu, SiLU, Sqrt
Status planBinary(Plan& plan);   // Add, Sub, Mul, Div
Status planSoftmax(Plan& plan);
Status planConcat(Plan& plan);
// int8 plans: where the node being planned, which computes `v`, can write its channels of the
// quantising concat that reads `v` (int8_policy.h concat_u8) in place: that concat's
// channels-last u8 output (the buffer another of its inputs made already, or buffer -1 and the
// desc to make) and `v`'s first channel in it. Nullopt unless one Concat along the channels
// reads `v`, once, and no other node does (`u8_readers`: the others read the u8 form the caller
// also writes, as a normalisation's int8 Convs do). useConcatInPlace() makes the buffer where
// needed and records it (Plan::defineConcatInPlace): the caller must then write `v`'s channels
// there.
// Halo sources (int8_policy.h halo_lo / halo_hi): a channels-last u8 of `padded` D, H, W per
// batch item whose interior at `lo` holds a tensor of `size`, the rest its zero point. fill()
// writes the halo (every run: the buffer's bytes belong to other steps in between);
// interiorOffset() is the interior's first element.
struct U8Halo {
    int64_t batch = 0, channels = 0;
    std::array<int64_t, 3> size{}, padded{}, lo{};
    uint8_t zero_point = 0;
    dnnl::memory::desc md() const;
    int64_t interiorOffset() const {
        return ((lo[0] * padded[1] + lo[1]) * padded[2] + lo[2]) * channels;
    }
    void fill(void* base) const;
};
// The halo `layer` asks for around its 5-D output of `shape`; nullopt for none.
std::optional<U8Halo> u8Halo(const Shape& shape, const quant::Int8Layer& layer);

struct ConcatTarget {
    MemRef cat;
    int64_t c0 = 0, channels = 0;  // v's first channel, the concat's channel count
    std::optional<U8Halo> halo;    // the concat's u8 is a halo source: its interior
};
std::optional<ConcatTarget> concatInPlaceTarget(const Plan& plan, ValueId v, size_t spatial_rank,
                                                bool u8_readers = false);
MemRef useConcatInPlace(Plan& plan, ValueId v, ConcatTarget& target);
Status planPlainUnary(Plan& plan);  // Erf, Sin, Cos
Status planWhere(Plan& plan);
// reduce.cpp
Status planReduce(Plan& plan);  // ReduceMean, ReduceSum, ReduceMax
// matmul.cpp
Status planMatMul(Plan& plan);
// pool.cpp
Status planPool(Plan& plan);  // MaxPool, AveragePool, GlobalAveragePool
// resize.cpp
Status planResize(Plan& plan);  // Resize/Upsample
// shape_ops.cpp
Status planShapeOp(Plan& plan);       // Pad, Identity, Reshape, Transpose, Slice, Roll
Status planExpandOrTile(Plan& plan);  // Expand, Tile
// attention.cpp
Status planAttention(Plan& plan);  // Attention, MultiHeadAttention
Status planRotary(Plan& plan);

// Small helpers the builders share (plan.cpp).
// Element strides of a row-major shape.
std::vector<int64_t> plainStrides(const Shape& s);
// `s` with leading 1s up to `rank` axes (numpy broadcasting's alignment).
Shape withLeadingOnes(const Shape& s, size_t rank);
// Element strides of `s` broadcast to the dims of `to` (0 along broadcast axes; numpy rules).
std::vector<int64_t> broadcastStrides(const Shape& s, const Shape& to);
// The value's current descriptor, or plain in the activation type for constants.
dnnl::memory::desc currentDesc(Plan& plan, ValueId v);
// The same bytes seen through another (plain) descriptor of the same size.
MemRef viewAs(Plan& plan, const MemRef& r, const dnnl::memory::desc& md);

// Applies the node's fused epilogue (residual add, then activation) to `out` in place with
// separate primitives, for ops that cannot fuse it (or part of it) themselves.
Status planUnfusedEpilogue(Plan& plan, const MemRef& out, bool residual = true,
                           bool activation = true);

// oneDNN algorithm and alpha/beta for an activation; false when it has no eltwise form.
bool eltwiseFor(ActivationKind act, float alpha, dnnl::algorithm& alg, float& a, float& b);

// Error naming the current node and op.
Status nodeError(const Plan& plan, const std::string& what);

}  // namespace voxseg::engine::cpu
