// The converter table (one entry per ONNX op, filled by the family files), the model-family hints
// for ops voxseg does not run, and the shared node-emission path of every converter.
#include "engine/backend.h"
#include "engine/onnx/converter.h"

#include <algorithm>

namespace voxseg::engine::onnx_detail {

namespace {

const ConverterTable& table() {
    static const ConverterTable t = [] {
        ConverterTable t;
        addConvConverters(t);
        addNormConverters(t);
        addElementwiseConverters(t);
        addReduceConverters(t);
        addMatMulConverters(t);
        addPoolConverters(t);
        addResizeConverters(t);
        addShapeConverters(t);
        return t;
    }();
    return t;
}

}  // namespace

Converter findConverter(const std::string& op_type) {
    const auto& t = table();
    auto it = t.find(op_type);
    return it == t.end() ? nullptr : it->second;
}

std::string modelFamilyHint(const std::string& op) {
    struct Hint {
        std::vector<const char*> ops;
        const char* family;
    };
    // Ops voxseg converts are listed too: a form of them it refuses (an Einsum equation, a
    // MatMul of integer tensors) says where the model probably comes from as well.
    static const std::vector<Hint> hints = {
        {{"Attention",
          "MultiHeadAttention",
          "SkipLayerNormalization",
          "BiasGelu",
          "FastGelu",
          "GroupQueryAttention",
          "RotaryEmbedding",
          "SimplifiedLayerNormalization",
          "Trilu",
          "CumSum",
          "Range",
          "MatMul",
          "Gemm",
          "Einsum",
          "LayerNormalization",
          "Erf",
          "Gelu",
          "Softmax",
          "Where",
          "Expand",
          "Tile",
          "Sin",
          "Cos",
          "ReduceMean",
          "Split"},
         "a transformer (MONAI SwinUNETR / UNETR, nnU-Net Primus, VISTA3D / SAM-style models)"},
        {{"RoiAlign", "NonMaxSuppression", "TopK"}, "detection heads (Retina U-Net, nnDetection)"},
        {{"GridSample", "AffineGrid"},
         "a spatial-transformer / registration network (VoxelMorph-like)"},
        {{"LSTM", "GRU", "RNN"}, "recurrent layers"},
        {{"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
          "MatMulInteger", "DynamicQuantizeLinear"},
         "a quantized (int8) model; export the float32 model"},
        {{"Loop", "If", "Scan"},
         "data-dependent control flow (torch.jit.script); export with tracing (torch.onnx.export)"},
        {{"NonZero", "ScatterND", "ScatterElements", "GatherND", "GatherElements", "Unique"},
         "data-dependent indexing (shapes known only at run time)"},
        {{"ConvTranspose3D", "MaxUnpool", "SpaceToDepth", "DepthToSpace"},
         "pixel-shuffle / unpooling decoders"},
        {{"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli"},
         "training-time sampling (export in eval() mode)"},
    };
    for (const Hint& h : hints)
        if (std::find(h.ops.begin(), h.ops.end(), op) != h.ops.end()) return h.family;
    return "";
}

// ---------------------------------------------------------------------------------------------

ValueId ImportState::newValue(const std::string& name) {
    const ValueId id = g.addValue({name, {}, DType::kFloat32, std::nullopt});
    ids[name] = id;
    return id;
}

ValueId ImportState::constantValue(const std::string& name, Tensor t) {
    Shape sh = t.shape();
    const DType d = t.dtype();
    const ValueId id = g.addValue({name, std::move(sh), d, std::move(t)});
    ids[name] = id;
    return id;
}

Status ImportState::addNode(Node node, const std::string& out_name) {
    node.outputs = {newValue(out_name)};
    g.nodes.push_back(std::move(node));
    const Status st = g.inferNodeShape(g.nodes.size() - 1);
    if (!st.isOk()) return Status(st.code(), st.message(), subject);
    return Status::ok();
}

Status ImportState::foldWithReference(const Node& node, const std::string& out_name) {
    Graph mini;
    Node n = node;
    for (ValueId& v : n.inputs) {
        if (v < 0) continue;
        const Tensor& t = g.constant(v);
        Tensor f = t.dtype() == DType::kFloat32 ? t : Tensor::fromFloats(t.shape(), t.toFloats());
        v = mini.addValue({g.values[v].name, f.shape(), DType::kFloat32, f});
    }
    n.outputs = {mini.addValue({out_name, {}, DType::kFloat32, std::nullopt})};
    mini.nodes.push_back(n);
    mini.outputs = n.outputs;
    auto exe = makeReferenceBackend()->compile(mini, {}, {});
    if (!exe) return Status(exe.status().code(), exe.status().message(), subject);
    std::vector<Tensor> out;
    VOXSEG_RETURN_IF_ERROR((*exe)->run({}, out));
    constantValue(out_name, out[0]);
    return Status::ok();
}

Status ImportState::emit(Node n, const std::string& out_name) {
    const std::string desc = std::string(opKindName(n.op)) + " node '" + n.name + "'";
    for (ValueId v : n.inputs)
        if (v >= 0 && !g.isConstant(v) && g.values[v].dtype != DType::kFloat32)
            return err(StatusCode::kUnsupported, desc + ": non-float activation input");
    const bool all_constant = std::all_of(n.inputs.begin(), n.inputs.end(),
                                          [&](ValueId v) { return v < 0 || g.isConstant(v); });
    if (all_constant) return foldWithReference(n, out_name);
    // Integer constants feeding a computing op (e.g. a Mul by a shape value) become float.
    for (ValueId& v : n.inputs)
        if (v >= 0 && g.isConstant(v) && g.constant(v).dtype() != DType::kFloat32)
            v = constantValue(g.values[v].name + "_f32",
                              Tensor::fromFloats(g.constant(v).shape(), g.constant(v).toFloats()));
    return addNode(std::move(n), out_name);
}

std::string ImportState::producerOf(ValueId v) const {
    for (const Node& n : g.nodes)
        if (!n.outputs.empty() && n.outputs[0] == v)
            return std::string(opKindName(n.op)) + " node '" + n.name + "'";
    return "";
}

// ---------------------------------------------------------------------------------------------

NodeContext::NodeContext(ImportState& state, const onnx::NodeProto& node, std::string node_desc,
                         std::vector<ValueId> inputs)
    : s(state), proto(node), desc(std::move(node_desc)), a(node, desc), in(std::move(inputs)) {
    n.name = proto.name().empty() ? desc : proto.name();
    n.inputs = in;
}

Status NodeContext::need(size_t count) const {
    for (size_t i = 0; i < count; ++i)
        if (input(i) < 0)
            return err(StatusCode::kCorruptData,
                       desc + ": required input " + std::to_string(i) + " missing");
    return Status::ok();
}

Status NodeContext::needConstant(size_t i, const char* what) const {
    if (input(i) < 0 || s.g.isConstant(input(i))) return Status::ok();
    const std::string producer = s.producerOf(input(i));
    return err(StatusCode::kUnsupported,
               desc + ": " + what + " (input " + std::to_string(i) + ", '" +
                   s.g.values[input(i)].name + "') is computed at run time" +
                   (producer.empty() ? std::string(" (a graph input)") : " by " + producer) +
                   "; voxseg needs it constant. It folds shape arithmetic that depends only on "
                   "the static input shape: export with a fixed input shape, or with shapes "
                   "that do not depend on tensor values");
}

void NodeContext::dropExtraOutputs(const std::string& what) {
    for (int i = 1; i < proto.output_size(); ++i)
        if (!proto.output(i).empty())
            s.dropped_outputs[proto.output(i)] =
                "output " + std::to_string(i) + " of " + desc + " (" + what + ")";
}

Node NodeContext::subNode(OpKind op, std::vector<ValueId> inputs, const std::string& suffix) const {
    Node m;
    m.op = op;
    m.name = n.name + (suffix.empty() ? "" : "/" + suffix);
    m.inputs = std::move(inputs);
    return m;
}

}  // namespace voxseg::engine::onnx_detail
