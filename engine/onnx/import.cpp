#include "engine/onnx/import.h"

#include "core/checked_math.h"
#include "core/file_io.h"
#include "core/log.h"
#include "engine/backend.h"
#include "engine/onnx/converter.h"
#include "engine/onnx/internal.h"
#include "engine/passes/import_patterns.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>

namespace voxseg::engine {
namespace {

using onnx_detail::Attrs;

constexpr int kMinOpset = 9;
constexpr int kMaxOpset = 21;

class Importer {
  public:
    Importer(std::string subject, const OnnxImportOptions& options) : options_(options) {
        st_.subject = std::move(subject);
    }

    // Consumes the initializers' data (released as each is copied into a Tensor).
    Result<Graph> run(onnx::ModelProto& model);

  private:
    Status readInputs(onnx::GraphProto& graph);
    Status importNode(const onnx::NodeProto& node, size_t index);
    // Looks the op up in the converter table (engine/onnx/) and emits its IR node(s).
    Status convertNode(const onnx::NodeProto& node, const std::string& desc,
                       const std::vector<ValueId>& in);

    ValueId newValue(const std::string& name) { return st_.newValue(name); }
    ValueId constantValue(const std::string& name, Tensor t) {
        return st_.constantValue(name, std::move(t));
    }
    const Tensor* constantOf(ValueId id) const { return st_.constantOf(id); }
    Status err(StatusCode code, const std::string& msg) const { return st_.err(code, msg); }
    // After `node` was imported: releases the constants no later node reads and no IR node uses.
    void releaseDeadConstants(const onnx::NodeProto& node);

    OnnxImportOptions options_;
    onnx_detail::ImportState st_;
    uint64_t folded_bytes_ = 0;  // all tensors constant folding made (max_folded_bytes)
    // How many nodes still to import read each name (graph outputs count once more, pinning
    // theirs): a constant whose count reaches 0 is dropped unless an IR node uses it, so that
    // folding's intermediates do not pile up (SwinUNETR 96^3 folds 540 MiB, most of it the
    // steps of its attention masks).
    std::unordered_map<std::string, int> remaining_reads_;
    // Short names for the state the import loop uses most.
    Graph& g_ = st_.g;
    int& opset_ = st_.opset;
    std::unordered_map<std::string, ValueId>& ids_ = st_.ids;
    std::unordered_map<std::string, std::string>& dropped_outputs_ = st_.dropped_outputs;
    const std::string& subject_ = st_.subject;
};

Status Importer::readInputs(onnx::GraphProto& graph) {
    std::set<std::string> initializers;
    for (auto& t : *graph.mutable_initializer()) {
        VOXSEG_ASSIGN_OR_RETURN(Tensor tensor, onnx_detail::tensorFromProto(t, "initializer"));
        constantValue(t.name(), std::move(tensor));
        initializers.insert(t.name());
        // the Tensor holds its own copy: the file's bytes are not kept twice (clear() would
        // keep the capacity)
        std::string().swap(*t.mutable_raw_data());
        google::protobuf::RepeatedField<float>().Swap(t.mutable_float_data());
    }
    size_t k = 0;
    for (const auto& in : graph.input()) {
        if (initializers.count(in.name())) continue;  // old exporters list weights as inputs
        const auto& type = in.type();
        if (!type.has_tensor_type())
            return err(StatusCode::kUnsupported, "input '" + in.name() + "' is not a tensor");
        if (type.tensor_type().elem_type() != onnx::TensorProto_DataType_FLOAT)
            return err(StatusCode::kUnsupported,
                       "input '" + in.name() + "' has ONNX element type " +
                           std::to_string(type.tensor_type().elem_type()) +
                           "; voxseg feeds float32 inputs (re-export with a float32 input)");
        Shape declared;
        bool symbolic = false;
        for (const auto& d : type.tensor_type().shape().dim()) {
            if (d.has_dim_value() && d.dim_value() > 0) {
                declared.push_back(d.dim_value());
            } else {
                declared.push_back(-1);
                symbolic = true;
            }
        }
        Shape shape;
        if (k < options_.input_shapes.size()) {
            shape = options_.input_shapes[k];
            if (!declared.empty() && declared.size() != shape.size())
                return err(StatusCode::kInvalidArgument,
                           "input '" + in.name() + "' has rank " + std::to_string(declared.size()) +
                               ", the given shape " + shapeToString(shape) + " does not");
            for (size_t i = 0; i < declared.size(); ++i)
                if (declared[i] > 0 && declared[i] != shape[i] && i > 0)
                    log::warning("engine", "{}: input '{}' declared {}, importing as {}", subject_,
                                 in.name(), shapeToString(declared), shapeToString(shape));
        } else {
            shape = declared;
            if (!shape.empty() && shape[0] == -1) shape[0] = 1;  // symbolic batch: 1
            if (symbolic && std::count(shape.begin(), shape.end(), -1) > 0)
                return err(StatusCode::kInvalidArgument,
                           "input '" + in.name() + "' has symbolic dims " +
                               shapeToString(declared) +
                               "; give a static input shape (the model's patch size)");
        }
        for (int64_t d : shape)
            if (d <= 0)
                return err(StatusCode::kInvalidArgument,
                           "input '" + in.name() + "': bad shape " + shapeToString(shape));
        if (!checkedProduct(shape))
            return err(StatusCode::kCorruptData, "input '" + in.name() + "' declares shape " +
                                                     shapeToString(shape) +
                                                     ", more than 2^63 elements (corrupt model)");
        const ValueId id = newValue(in.name());
        g_.values[id].shape = shape;
        g_.inputs.push_back(id);
        ++k;
    }
    if (k == 0) return err(StatusCode::kCorruptData, "the model has no (non-constant) input");
    if (!options_.input_shapes.empty() && options_.input_shapes.size() != k)
        return err(StatusCode::kInvalidArgument, std::to_string(options_.input_shapes.size()) +
                                                     " input shapes given, model has " +
                                                     std::to_string(k) + " inputs");
    return Status::ok();
}

Status Importer::importNode(const onnx::NodeProto& node, size_t index) {
    const std::string& op = node.op_type();
    const std::string name = node.name().empty() ? op + "_" + std::to_string(index) : node.name();
    const std::string desc = op + " node '" + name + "'";
    if (!node.domain().empty() && node.domain() != "ai.onnx")
        return err(StatusCode::kUnsupported,
                   desc + ": operator domain '" + node.domain() + "' is not supported");
    if (node.output_size() == 0) return err(StatusCode::kCorruptData, desc + ": no outputs");

    std::vector<ValueId> in;
    for (const std::string& n : node.input()) {
        if (n.empty()) {
            in.push_back(-1);
            continue;
        }
        auto it = ids_.find(n);
        if (it == ids_.end()) {
            auto d = dropped_outputs_.find(n);
            if (d != dropped_outputs_.end())
                return err(StatusCode::kUnsupported, desc + " uses '" + n + "', " + d->second +
                                                         ", which voxseg does not compute");
            return err(StatusCode::kCorruptData,
                       desc + ": input '" + n + "' is not defined before use (corrupt model?)");
        }
        in.push_back(it->second);
    }

    // Constants and shape arithmetic are evaluated here, never reach a backend.
    if (op == "Constant") {
        Attrs a(node, desc);
        Tensor t;
        if (const auto* p = a.getTensor("value")) {
            VOXSEG_ASSIGN_OR_RETURN(t, onnx_detail::tensorFromProto(*p, desc + " value"));
        } else if (a.has("value_float")) {
            t = Tensor::fromFloats({}, {a.getFloat("value_float", 0)});
        } else if (a.has("value_floats")) {
            const auto v = a.getFloats("value_floats");
            t = Tensor::fromFloats({static_cast<int64_t>(v.size())}, v);
        } else if (a.has("value_int")) {
            t = Tensor::fromInt64s({}, {a.getInt("value_int", 0)});
        } else if (a.has("value_ints")) {
            const auto v = a.getInts("value_ints");
            t = Tensor::fromInt64s({static_cast<int64_t>(v.size())}, v);
        } else {
            return err(StatusCode::kUnsupported, desc + ": only tensor/float/int values supported");
        }
        VOXSEG_RETURN_IF_ERROR(a.checkAllKnown());
        constantValue(node.output(0), std::move(t));
        return Status::ok();
    }
    if (op == "Shape") {
        Attrs a(node, desc);
        if (in.empty() || in[0] < 0) return err(StatusCode::kCorruptData, desc + ": no input");
        const Shape& s = g_.values[in[0]].shape;
        const int64_t rank = static_cast<int64_t>(s.size());
        int64_t start = a.getInt("start", 0), end = a.getInt("end", rank);
        if (start < 0) start += rank;
        if (end < 0) end += rank;
        start = std::clamp<int64_t>(start, 0, rank);
        end = std::clamp<int64_t>(end, start, rank);
        VOXSEG_RETURN_IF_ERROR(a.checkAllKnown());
        std::vector<int64_t> v(s.begin() + start, s.begin() + end);
        constantValue(node.output(0), Tensor::fromInt64s({static_cast<int64_t>(v.size())}, v));
        return Status::ok();
    }
    const bool all_constant =
        std::all_of(in.begin(), in.end(), [&](ValueId v) { return v < 0 || g_.isConstant(v); });
    if (all_constant && !in.empty()) {
        std::vector<const Tensor*> tensors;
        for (ValueId v : in) tensors.push_back(constantOf(v));
        auto folded = onnx_detail::foldConstantNode(node, tensors, opset_, desc);
        if (!folded) return Status(folded.status().code(), folded.status().message(), subject_);
        if (folded->has_value()) {
            const auto& outs = **folded;
            for (const Tensor& t : outs) folded_bytes_ += t.bytes();
            if (folded_bytes_ > options_.max_folded_bytes)
                return err(StatusCode::kUnsupported,
                           fmt::format("{}: constant folding would hold {} MiB of computed "
                                       "constants (at most {} MiB): the model computes huge "
                                       "tensors from small ones",
                                       desc, folded_bytes_ >> 20, options_.max_folded_bytes >> 20));
            for (size_t i = 0; i < outs.size() && i < static_cast<size_t>(node.output_size()); ++i)
                constantValue(node.output(static_cast<int>(i)), outs[i]);
            return Status::ok();
        }
    }
    return convertNode(node, desc, in);
}

Status Importer::convertNode(const onnx::NodeProto& proto, const std::string& desc,
                             const std::vector<ValueId>& in) {
    const std::string& op = proto.op_type();
    const onnx_detail::Converter convert = onnx_detail::findConverter(op);
    const std::string family = onnx_detail::modelFamilyHint(op);
    const std::string probably =
        family.empty() ? std::string() : "; the model is probably " + family;
    if (!convert)
        return err(StatusCode::kUnsupported, desc + ": operator '" + op +
                                                 "' is not supported by voxseg" + probably +
                                                 " (docs/engine-ops.md lists the supported ops)");
    onnx_detail::NodeContext ctx(st_, proto, desc, in);
    if (Status s = convert(ctx); !s.isOk()) {
        // A form of a supported op voxseg refuses: the same hint, once.
        if (s.code() != StatusCode::kUnsupported || probably.empty() ||
            s.message().find("the model is probably") != std::string::npos)
            return s;
        return Status(s.code(), s.message() + probably, s.subject());
    }
    if (ctx.emitted) return Status::ok();
    VOXSEG_RETURN_IF_ERROR(ctx.a.checkAllKnown());
    return st_.emit(std::move(ctx.n), proto.output(0));
}

void Importer::releaseDeadConstants(const onnx::NodeProto& node) {
    std::vector<ValueId> dead;
    for (const std::string& name : node.input()) {
        if (name.empty()) continue;
        auto r = remaining_reads_.find(name);
        if (r == remaining_reads_.end() || --r->second > 0) continue;
        auto id = ids_.find(name);
        if (id != ids_.end() && g_.isConstant(id->second)) dead.push_back(id->second);
    }
    if (dead.empty()) return;
    // Converters may also extend nodes emitted earlier (a bias folded into its MatMul): every
    // node is looked at, not only this one's.
    std::vector<bool> used(g_.values.size(), false);
    for (const Node& n : g_.nodes) {
        for (ValueId v : n.inputs)
            if (v >= 0) used[v] = true;
        if (n.fused_residual >= 0) used[n.fused_residual] = true;
        if (n.fused_prelu_slope >= 0) used[n.fused_prelu_slope] = true;
    }
    for (ValueId v : dead)
        if (!used[v]) g_.values[v].constant.reset();
}

Result<Graph> Importer::run(onnx::ModelProto& model) {
    if (!model.has_graph()) return err(StatusCode::kCorruptData, "ONNX model has no graph");
    for (const auto& o : model.opset_import())
        if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = static_cast<int>(o.version());
    if (opset_ == 0) return err(StatusCode::kCorruptData, "ONNX model declares no opset");
    if (opset_ < kMinOpset || opset_ > kMaxOpset)
        return err(StatusCode::kUnsupported, "ONNX opset " + std::to_string(opset_) +
                                                 " is not supported (" + std::to_string(kMinOpset) +
                                                 "-" + std::to_string(kMaxOpset) +
                                                 "); re-export with opset 17");
    auto& graph = *model.mutable_graph();
    if (graph.node_size() > options_.max_nodes)
        return err(StatusCode::kUnsupported,
                   fmt::format("the graph claims {} nodes > limit {} nodes per graph: not a "
                               "segmentation network voxseg can run (raise --max-graph-nodes "
                               "if it is)",
                               graph.node_size(), options_.max_nodes));
    VOXSEG_RETURN_IF_ERROR(readInputs(graph));
    for (const auto& node : graph.node())
        for (const std::string& n : node.input())
            if (!n.empty()) ++remaining_reads_[n];
    for (const auto& out : graph.output()) ++remaining_reads_[out.name()];
    for (int i = 0; i < graph.node_size(); ++i) {
        VOXSEG_RETURN_IF_ERROR(importNode(graph.node(i), static_cast<size_t>(i)));
        releaseDeadConstants(graph.node(i));
    }
    for (const auto& out : graph.output()) {
        auto it = ids_.find(out.name());
        if (it == ids_.end())
            return err(StatusCode::kCorruptData,
                       "graph output '" + out.name() + "' is never computed");
        if (g_.isConstant(it->second))
            return err(
                StatusCode::kUnsupported,
                "graph output '" + out.name() + "' is a constant (does not depend on the input)");
        g_.outputs.push_back(it->second);
    }
    if (g_.outputs.empty()) return err(StatusCode::kCorruptData, "the model has no outputs");
    passes::pruneDeadNodes(g_);
    passes::fuseGroupNormPattern(g_);
    passes::fuseLayerNormPattern(g_);
    passes::fuseGeluPattern(g_);
    passes::fuseSiluPattern(g_);
    passes::pruneDeadNodes(g_);
    std::vector<Shape> shapes;
    for (ValueId v : g_.inputs) shapes.push_back(g_.values[v].shape);
    const Status s = g_.inferShapes(shapes);
    if (!s.isOk()) return Status(s.code(), s.message(), subject_);
    return std::move(g_);
}

}  // namespace

namespace {

Status parseModel(std::string_view bytes, const OnnxImportOptions& options,
                  const std::string& subject, onnx::ModelProto& model) {
    if (bytes.size() > options.max_file_bytes)
        return unsupported(fmt::format("ONNX model of {} bytes > limit {} bytes per model file; "
                                       "raise --max-model-bytes if this is real",
                                       bytes.size(), options.max_file_bytes),
                           subject);
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
        return unsupported("ONNX model larger than 2 GB", subject);
    if (bytes.empty() || !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
        return corruptData("not a valid ONNX model (truncated, or not an ONNX protobuf file)",
                           subject);
    return Status::ok();
}

Result<Graph> importModel(onnx::ModelProto& model, const OnnxImportOptions& options,
                          const std::string& subject) {
    try {
        Importer importer(subject, options);
        return importer.run(model);
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory while importing the ONNX model",
                      subject);
    } catch (const std::exception& e) {  // Tensor helpers throw on inconsistent shapes
        return corruptData(std::string("inconsistent ONNX model: ") + e.what(), subject);
    }
}

}  // namespace

Result<Graph> importOnnxBytes(std::string_view bytes, const OnnxImportOptions& options,
                              const std::string& subject) {
    onnx::ModelProto model;
    VOXSEG_RETURN_IF_ERROR(parseModel(bytes, options, subject, model));
    return importModel(model, options, subject);
}

Result<Graph> importOnnx(const std::filesystem::path& path, const OnnxImportOptions& options) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return notFound("ONNX model not found", path.string());
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > options.max_file_bytes)
        return unsupported(fmt::format("ONNX model of {} bytes > limit {} bytes per model file, "
                                       "refused before reading it; raise --max-model-bytes if "
                                       "this is real",
                                       size, options.max_file_bytes),
                           path.string());
    // One copy of the file, released once parsed (a 250 MB model was held three times over
    // during the import: the stream's buffer, its str() copy and the initializers' Tensors).
    onnx::ModelProto model;
    {
        // Capped again while read: the file may grow past the limit meanwhile.
        VOXSEG_ASSIGN_OR_RETURN(
            const std::string bytes,
            readFileBytes(path.string(), "the ONNX model",
                          {options.max_file_bytes, "raise --max-model-bytes if this is real"}));
        VOXSEG_RETURN_IF_ERROR(parseModel(bytes, options, path.string(), model));
    }
    return importModel(model, options, path.string());
}

}  // namespace voxseg::engine
