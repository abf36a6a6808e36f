#include "engine/onnx_import.h"

#include "core/log.h"
#include "engine/backend.h"
#include "engine/onnx_internal.h"

#include <algorithm>
#include <cmath>
#include <fstream>
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
    Importer(std::string subject, const OnnxImportOptions& options)
        : subject_(std::move(subject)), options_(options) {}

    Result<Graph> run(const onnx::ModelProto& model);

  private:
    Status readInputs(const onnx::GraphProto& graph);
    Status importNode(const onnx::NodeProto& node, size_t index);
    Status convertNode(const onnx::NodeProto& node, const std::string& desc,
                       const std::vector<ValueId>& in);
    Status foldWithReference(const Node& node, const onnx::NodeProto& proto);

    ValueId newValue(const std::string& name) {
        const ValueId id = g_.addValue({name, {}, DType::kFloat32, std::nullopt});
        ids_[name] = id;
        return id;
    }
    ValueId constantValue(const std::string& name, Tensor t) {
        Shape s = t.shape();
        const DType d = t.dtype();
        const ValueId id = g_.addValue({name, std::move(s), d, std::move(t)});
        ids_[name] = id;
        return id;
    }
    // Adds an IR node whose output is the ONNX output `out_name`, and infers its shape.
    Status addNode(Node node, const std::string& out_name) {
        node.outputs = {newValue(out_name)};
        g_.nodes.push_back(std::move(node));
        const Status s = g_.inferNodeShape(g_.nodes.size() - 1);
        if (!s.isOk()) return Status(s.code(), s.message(), subject_);
        return Status::ok();
    }
    // A value's tensor when it is constant (nullptr otherwise).
    const Tensor* constantOf(ValueId id) const {
        return id >= 0 && g_.isConstant(id) ? &g_.constant(id) : nullptr;
    }
    Status err(StatusCode code, const std::string& msg) const { return {code, msg, subject_}; }

    std::string subject_;
    OnnxImportOptions options_;
    Graph g_;
    int opset_ = 0;
    std::unordered_map<std::string, ValueId> ids_;
    // ONNX outputs voxseg does not compute (MaxPool indices, BatchNorm training stats...).
    std::unordered_map<std::string, std::string> dropped_outputs_;
};

// ---------------------------------------------------------------------------------------------
// Attribute helpers shared by Conv / ConvTranspose / pools.

struct WindowAttrs {
    std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
    std::string auto_pad;
};

Status readWindow(Attrs& a, size_t sr, const std::vector<int64_t>& kernel_default, WindowAttrs& w) {
    w.kernel = a.getInts("kernel_shape", kernel_default);
    w.strides = a.getInts("strides", std::vector<int64_t>(sr, 1));
    w.dilations = a.getInts("dilations", std::vector<int64_t>(sr, 1));
    const std::vector<int64_t> pads = a.getInts("pads", std::vector<int64_t>(2 * sr, 0));
    w.auto_pad = a.getString("auto_pad", "NOTSET");
    if (w.kernel.size() != sr || w.strides.size() != sr || w.dilations.size() != sr ||
        pads.size() != 2 * sr)
        return invalidArgument(a.desc() + ": kernel_shape/strides/dilations/pads do not match " +
                               std::to_string(sr) + " spatial axes");
    for (size_t i = 0; i < sr; ++i)
        if (w.kernel[i] <= 0 || w.strides[i] <= 0 || w.dilations[i] <= 0 || pads[i] < 0 ||
            pads[sr + i] < 0)
            return invalidArgument(a.desc() +
                                   ": non-positive kernel/stride/dilation or negative pad");
    w.pads_begin.assign(pads.begin(), pads.begin() + sr);
    w.pads_end.assign(pads.begin() + sr, pads.end());
    if (w.auto_pad != "NOTSET" && w.auto_pad != "VALID" && w.auto_pad != "SAME_UPPER" &&
        w.auto_pad != "SAME_LOWER")
        return unsupported(a.desc() + ": auto_pad '" + w.auto_pad + "'");
    return Status::ok();
}

// Resolves auto_pad for a forward window op (Conv, pools) on input spatial dims `in`.
void applyAutoPad(WindowAttrs& w, const Shape& x) {
    if (w.auto_pad == "NOTSET") return;
    const size_t sr = w.kernel.size();
    for (size_t i = 0; i < sr; ++i) {
        if (w.auto_pad == "VALID") {
            w.pads_begin[i] = w.pads_end[i] = 0;
            continue;
        }
        const int64_t in = x[2 + i];
        const int64_t out = (in + w.strides[i] - 1) / w.strides[i];
        const int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
        const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + span - in);
        const int64_t small = total / 2;
        w.pads_begin[i] = w.auto_pad == "SAME_UPPER" ? small : total - small;
        w.pads_end[i] = total - w.pads_begin[i];
    }
}

// ---------------------------------------------------------------------------------------------

Status Importer::readInputs(const onnx::GraphProto& graph) {
    std::set<std::string> initializers;
    for (const auto& t : graph.initializer()) {
        VOXSEG_ASSIGN_OR_RETURN(Tensor tensor, onnx_detail::tensorFromProto(t, "initializer"));
        constantValue(t.name(), std::move(tensor));
        initializers.insert(t.name());
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
            for (size_t i = 0; i < outs.size() && i < static_cast<size_t>(node.output_size()); ++i)
                constantValue(node.output(static_cast<int>(i)), outs[i]);
            return Status::ok();
        }
    }
    return convertNode(node, desc, in);
}

// Runs a node whose inputs are all constant on the reference backend and stores its output as
// a constant (weights preprocessing that some exporters leave in the graph).
Status Importer::foldWithReference(const Node& node, const onnx::NodeProto& proto) {
    Graph mini;
    Node n = node;
    for (ValueId& v : n.inputs) {
        if (v < 0) continue;
        const Tensor& t = g_.constant(v);
        Tensor f = t.dtype() == DType::kFloat32 ? t : Tensor::fromFloats(t.shape(), t.toFloats());
        v = mini.addValue({g_.values[v].name, f.shape(), DType::kFloat32, f});
    }
    n.outputs = {mini.addValue({proto.output(0), {}, DType::kFloat32, std::nullopt})};
    mini.nodes.push_back(n);
    mini.outputs = n.outputs;
    auto exe = makeReferenceBackend()->compile(mini, {}, {});
    if (!exe) return Status(exe.status().code(), exe.status().message(), subject_);
    std::vector<Tensor> out;
    VOXSEG_RETURN_IF_ERROR((*exe)->run({}, out));
    constantValue(proto.output(0), out[0]);
    return Status::ok();
}

Status Importer::convertNode(const onnx::NodeProto& proto, const std::string& desc,
                             const std::vector<ValueId>& in) {
    const std::string& op = proto.op_type();
    Attrs a(proto, desc);
    Node n;
    n.name = proto.name().empty() ? desc : proto.name();
    n.inputs = in;
    auto input = [&](size_t i) -> ValueId { return i < in.size() ? in[i] : -1; };
    auto shapeOf = [&](size_t i) -> const Shape& { return g_.values[in[i]].shape; };
    auto need = [&](size_t count) -> Status {
        for (size_t i = 0; i < count; ++i)
            if (input(i) < 0)
                return err(StatusCode::kCorruptData,
                           desc + ": required input " + std::to_string(i) + " missing");
        return Status::ok();
    };
    auto needConstant = [&](size_t i, const char* what) -> Status {
        if (input(i) >= 0 && !g_.isConstant(input(i)))
            return err(StatusCode::kUnsupported,
                       desc + ": " + what + " computed at run time; voxseg needs it constant");
        return Status::ok();
    };
    auto dropExtraOutputs = [&](const std::string& what) {
        for (int i = 1; i < proto.output_size(); ++i)
            if (!proto.output(i).empty())
                dropped_outputs_[proto.output(i)] =
                    "output " + std::to_string(i) + " of " + desc + " (" + what + ")";
    };

    if (op == "Conv" || op == "ConvTranspose") {
        const bool transpose = op == "ConvTranspose";
        n.op = transpose ? OpKind::kConvTranspose : OpKind::kConv;
        VOXSEG_RETURN_IF_ERROR(need(2));
        VOXSEG_RETURN_IF_ERROR(needConstant(1, "the weight"));
        VOXSEG_RETURN_IF_ERROR(needConstant(2, "the bias"));
        const Shape& x = shapeOf(0);
        const Shape& w = shapeOf(1);
        if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
            return err(StatusCode::kUnsupported,
                       desc + ": input " + shapeToString(x) + " / weight " + shapeToString(w) +
                           ": voxseg runs 1D-3D convolutions on NC(D)(H)W tensors");
        const size_t sr = x.size() - 2;
        WindowAttrs wa;
        VOXSEG_RETURN_IF_ERROR(readWindow(a, sr, Shape(w.begin() + 2, w.end()), wa));
        if (wa.kernel != Shape(w.begin() + 2, w.end()))
            return err(StatusCode::kInvalidArgument, desc + ": kernel_shape " +
                                                         shapeToString(wa.kernel) + " but weight " +
                                                         shapeToString(w));
        n.conv.group = a.getInt("group", 1);
        if (n.conv.group <= 0)
            return err(StatusCode::kInvalidArgument, desc + ": group must be positive");
        if (transpose) {
            n.conv.output_padding = a.getInts("output_padding", std::vector<int64_t>(sr, 0));
            const std::vector<int64_t> output_shape = a.getInts("output_shape");
            if (n.conv.output_padding.size() != sr)
                return err(StatusCode::kInvalidArgument, desc + ": output_padding length");
            if (!output_shape.empty() || (wa.auto_pad != "NOTSET" && wa.auto_pad != "VALID")) {
                // Pads that give the requested (or SAME: input*stride) output size.
                std::vector<int64_t> target = output_shape;
                if (target.size() == sr + 2) target.erase(target.begin(), target.begin() + 2);
                if (target.empty())
                    for (size_t i = 0; i < sr; ++i) target.push_back(x[2 + i] * wa.strides[i]);
                if (target.size() != sr)
                    return err(StatusCode::kInvalidArgument, desc + ": output_shape length");
                for (size_t i = 0; i < sr; ++i) {
                    const int64_t total = wa.strides[i] * (x[2 + i] - 1) +
                                          n.conv.output_padding[i] +
                                          (wa.kernel[i] - 1) * wa.dilations[i] + 1 - target[i];
                    if (total < 0) {  // output larger than the kernel reaches: extra output_padding
                        n.conv.output_padding[i] -= total;
                        wa.pads_begin[i] = wa.pads_end[i] = 0;
                        continue;
                    }
                    const bool upper =
                        wa.auto_pad == "SAME_UPPER";  // ONNX: NOTSET pads like SAME_LOWER
                    wa.pads_begin[i] = upper ? total / 2 : total - total / 2;
                    wa.pads_end[i] = total - wa.pads_begin[i];
                }
            } else if (wa.auto_pad == "VALID") {
                std::fill(wa.pads_begin.begin(), wa.pads_begin.end(), 0);
                std::fill(wa.pads_end.begin(), wa.pads_end.end(), 0);
            }
        } else {
            applyAutoPad(wa, x);
        }
        n.conv.spatial_rank = static_cast<int>(sr);
        n.conv.kernel = wa.kernel;
        n.conv.strides = wa.strides;
        n.conv.dilations = wa.dilations;
        n.conv.pads_begin = wa.pads_begin;
        n.conv.pads_end = wa.pads_end;
        n.conv.in_channels = transpose ? w[0] : w[1] * n.conv.group;
        n.conv.out_channels = transpose ? w[1] * n.conv.group : w[0];
        n.conv.has_bias = input(2) >= 0;
        n.inputs.resize(n.conv.has_bias ? 3 : 2);
    } else if (op == "InstanceNormalization" || op == "BatchNormalization" ||
               op == "GroupNormalization") {
        n.norm.epsilon = a.getFloat("epsilon", 1e-5f);
        if (op == "InstanceNormalization") {
            n.op = OpKind::kInstanceNorm;
            VOXSEG_RETURN_IF_ERROR(need(3));
        } else if (op == "BatchNormalization") {
            n.op = OpKind::kBatchNorm;
            VOXSEG_RETURN_IF_ERROR(need(5));
            a.ignore({"momentum", "spatial", "consumed_inputs", "is_test"});
            if (a.getInt("training_mode", 0) != 0)
                return err(StatusCode::kUnsupported,
                           desc + ": training_mode=1; export the model in eval() mode");
            dropExtraOutputs("training statistics");
            n.inputs.resize(5);
        } else {
            n.op = OpKind::kGroupNorm;
            VOXSEG_RETURN_IF_ERROR(need(3));
            n.norm.num_groups = a.getInt("num_groups", 0);
            a.ignore({"stash_type"});
            const int64_t c = shapeOf(0).size() > 1 ? shapeOf(0)[1] : 0;
            const int64_t groups = n.norm.num_groups;
            if (groups <= 0 || c % groups)
                return err(StatusCode::kInvalidArgument, desc + ": " + std::to_string(c) +
                                                             " channels, num_groups " +
                                                             std::to_string(groups));
            // Opset 18-20 scale/bias are per group: expand them to per channel.
            for (size_t k = 1; k < 3; ++k) {
                VOXSEG_RETURN_IF_ERROR(needConstant(k, "the scale/bias"));
                const Tensor& t = g_.constant(in[k]);
                if (t.numel() == groups && groups != c) {
                    const auto v = t.toFloats();
                    std::vector<float> per_channel;
                    for (int64_t ch = 0; ch < c; ++ch) per_channel.push_back(v[ch / (c / groups)]);
                    n.inputs[k] = constantValue(g_.values[in[k]].name + "_per_channel",
                                                Tensor::fromFloats({c}, per_channel));
                }
            }
        }
        for (size_t k = 1; k < n.inputs.size(); ++k)
            VOXSEG_RETURN_IF_ERROR(needConstant(k, "the normalization parameters"));
    } else if (op == "Relu" || op == "Sigmoid" || op == "Tanh") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = op == "Relu" ? OpKind::kRelu : op == "Sigmoid" ? OpKind::kSigmoid : OpKind::kTanh;
    } else if (op == "LeakyRelu") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kLeakyRelu;
        n.alpha = a.getFloat("alpha", 0.01f);
    } else if (op == "PRelu") {
        VOXSEG_RETURN_IF_ERROR(need(2));
        VOXSEG_RETURN_IF_ERROR(needConstant(1, "the slope"));
        n.op = OpKind::kPRelu;
    } else if (op == "Softmax") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kSoftmax;
        const Shape x = shapeOf(0);
        const int64_t rank = static_cast<int64_t>(x.size());
        int64_t axis = a.getInt("axis", opset_ >= 13 ? -1 : 1);
        if (axis < 0) axis += rank;
        if (axis < 0 || axis >= rank)
            return err(StatusCode::kInvalidArgument, desc + ": axis out of range");
        n.axis = axis;
        bool trailing_ones = true;
        for (int64_t i = axis + 1; i < rank; ++i) trailing_ones &= x[i] == 1;
        if (opset_ < 13 && !trailing_ones) {
            // Before opset 13 Softmax normalises over all axes from `axis` on, jointly:
            // flatten them, softmax the last axis, restore the shape.
            VOXSEG_RETURN_IF_ERROR(a.checkAllKnown());
            Node flat;
            flat.op = OpKind::kReshape;
            flat.name = n.name + "/flatten";
            flat.inputs = {in[0]};
            flat.shape.assign(x.begin(), x.begin() + axis);
            if (!flat.shape.empty()) flat.shape[0] = 0;
            flat.shape.push_back(-1);
            VOXSEG_RETURN_IF_ERROR(addNode(flat, proto.output(0) + "/flat"));
            n.inputs = {g_.nodes.back().outputs[0]};
            VOXSEG_RETURN_IF_ERROR(addNode(n, proto.output(0) + "/softmax"));
            Node back;
            back.op = OpKind::kReshape;
            back.name = n.name + "/unflatten";
            back.inputs = {g_.nodes.back().outputs[0]};
            back.shape = x;
            back.shape[0] = 0;
            return addNode(back, proto.output(0));
        }
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
        VOXSEG_RETURN_IF_ERROR(need(2));
        n.op = op == "Add"   ? OpKind::kAdd
               : op == "Sub" ? OpKind::kSub
               : op == "Mul" ? OpKind::kMul
                             : OpKind::kDiv;
        a.ignore({});
        if (a.has("broadcast") || a.has("axis"))
            return err(StatusCode::kUnsupported,
                       desc + ": legacy broadcast attributes (opset < 7); re-export");
    } else if (op == "Concat") {
        if (in.empty()) return err(StatusCode::kCorruptData, desc + ": no inputs");
        VOXSEG_RETURN_IF_ERROR(need(in.size()));
        n.op = OpKind::kConcat;
        int64_t axis = a.getInt("axis", 1);
        if (axis < 0) axis += static_cast<int64_t>(shapeOf(0).size());
        n.axis = axis;
        // Constant operands (rare) are materialised as float constants by the reference path.
    } else if (op == "Resize" || op == "Upsample") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kResize;
        const Shape x = shapeOf(0);
        const std::string mode = a.getString("mode", "nearest");
        if (mode == "nearest")
            n.resize.mode = ResizeMode::kNearest;
        else if (mode == "linear" || mode == "bilinear" || mode == "trilinear")
            n.resize.mode = ResizeMode::kLinear;
        else
            return err(StatusCode::kUnsupported,
                       desc + ": mode '" + mode + "' (cubic is not supported)");
        std::vector<float> scales;
        std::vector<int64_t> sizes;
        if (op == "Upsample" || opset_ < 11) {
            n.resize.coord = ResizeCoord::kAsymmetric;
            n.resize.nearest = NearestRounding::kFloor;
            if (a.has("scales")) {
                scales = a.getFloats("scales");
            } else {
                VOXSEG_RETURN_IF_ERROR(need(2));
                VOXSEG_RETURN_IF_ERROR(needConstant(1, "scales"));
                scales = g_.constant(in[1]).toFloats();
            }
        } else {
            const std::string coord = a.getString("coordinate_transformation_mode", "half_pixel");
            if (coord == "half_pixel")
                n.resize.coord = ResizeCoord::kHalfPixel;
            else if (coord == "pytorch_half_pixel")
                n.resize.coord = ResizeCoord::kPytorchHalfPixel;
            else if (coord == "align_corners")
                n.resize.coord = ResizeCoord::kAlignCorners;
            else if (coord == "asymmetric")
                n.resize.coord = ResizeCoord::kAsymmetric;
            else
                return err(StatusCode::kUnsupported,
                           desc + ": coordinate_transformation_mode '" + coord + "'");
            const std::string nm = a.getString("nearest_mode", "round_prefer_floor");
            if (nm == "round_prefer_floor")
                n.resize.nearest = NearestRounding::kRoundPreferFloor;
            else if (nm == "round_prefer_ceil")
                n.resize.nearest = NearestRounding::kRoundPreferCeil;
            else if (nm == "floor")
                n.resize.nearest = NearestRounding::kFloor;
            else if (nm == "ceil")
                n.resize.nearest = NearestRounding::kCeil;
            else
                return err(StatusCode::kUnsupported, desc + ": nearest_mode '" + nm + "'");
            a.ignore({"cubic_coeff_a", "extrapolation_value"});
            if (a.getInt("exclude_outside", 0) != 0 || a.getInt("antialias", 0) != 0)
                return err(StatusCode::kUnsupported, desc + ": exclude_outside/antialias");
            if (a.getString("keep_aspect_ratio_policy", "stretch") != "stretch")
                return err(StatusCode::kUnsupported, desc + ": keep_aspect_ratio_policy");
            for (size_t k = 1; k < 4; ++k)
                VOXSEG_RETURN_IF_ERROR(needConstant(k, "roi/scales/sizes"));
            if (input(2) >= 0) scales = g_.constant(in[2]).toFloats();
            if (input(3) >= 0) sizes = g_.constant(in[3]).toInt64s();
            std::vector<int64_t> axes = a.getInts("axes");
            if (!axes.empty()) {  // opset 18: scales/sizes for the listed axes only
                std::vector<float> full_scales(x.size(), 1.0f);
                std::vector<int64_t> full_sizes = x;
                for (size_t k = 0; k < axes.size(); ++k) {
                    int64_t ax = axes[k] < 0 ? axes[k] + static_cast<int64_t>(x.size()) : axes[k];
                    if (ax < 0 || ax >= static_cast<int64_t>(x.size()))
                        return err(StatusCode::kInvalidArgument, desc + ": axes out of range");
                    if (k < scales.size()) full_scales[ax] = scales[k];
                    if (k < sizes.size()) full_sizes[ax] = sizes[k];
                }
                if (!scales.empty()) scales = full_scales;
                if (!sizes.empty()) sizes = full_sizes;
            }
        }
        if (!sizes.empty()) {
            if (sizes.size() != x.size())
                return err(StatusCode::kInvalidArgument, desc + ": sizes do not match the rank");
            scales.clear();
            for (size_t i = 0; i < x.size(); ++i)
                scales.push_back(static_cast<float>(static_cast<double>(sizes[i]) / double(x[i])));
        }
        if (scales.size() != x.size())
            return err(StatusCode::kInvalidArgument,
                       desc + ": needs one scale per axis of " + shapeToString(x));
        if (scales[0] != 1.0f || scales[1] != 1.0f)
            return err(StatusCode::kUnsupported, desc + ": resizing batch or channel axes");
        n.resize.scales = scales;
        n.inputs = {in[0]};
    } else if (op == "MaxPool" || op == "AveragePool") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = op == "MaxPool" ? OpKind::kMaxPool : OpKind::kAveragePool;
        const Shape x = shapeOf(0);
        if (x.size() < 3) return err(StatusCode::kInvalidArgument, desc + ": input rank < 3");
        WindowAttrs wa;
        VOXSEG_RETURN_IF_ERROR(readWindow(a, x.size() - 2, {}, wa));
        applyAutoPad(wa, x);
        n.pool.kernel = wa.kernel;
        n.pool.strides = wa.strides;
        n.pool.dilations = wa.dilations;
        n.pool.pads_begin = wa.pads_begin;
        n.pool.pads_end = wa.pads_end;
        n.pool.ceil_mode = a.getInt("ceil_mode", 0) != 0;
        n.pool.count_include_pad = a.getInt("count_include_pad", 0) != 0;
        if (a.getInt("storage_order", 0) != 0)
            return err(StatusCode::kUnsupported, desc + ": storage_order=1");
        dropExtraOutputs("pooling indices");
    } else if (op == "GlobalAveragePool") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kGlobalAveragePool;
    } else if (op == "Pad") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kPad;
        const Shape x = shapeOf(0);
        const std::string mode = a.getString("mode", "constant");
        if (mode == "constant")
            n.pad.mode = PadAttrs::Mode::kConstant;
        else if (mode == "reflect")
            n.pad.mode = PadAttrs::Mode::kReflect;
        else if (mode == "edge")
            n.pad.mode = PadAttrs::Mode::kEdge;
        else
            return err(StatusCode::kUnsupported, desc + ": mode '" + mode + "'");
        std::vector<int64_t> pads;
        if (opset_ < 11) {
            pads = a.getInts("pads");
            n.pad.value = a.getFloat("value", 0.0f);
        } else {
            VOXSEG_RETURN_IF_ERROR(need(2));
            for (size_t k = 1; k < 4; ++k)
                VOXSEG_RETURN_IF_ERROR(needConstant(k, "pads/value/axes"));
            pads = g_.constant(in[1]).toInt64s();
            if (input(2) >= 0 && g_.constant(in[2]).numel() > 0)
                n.pad.value =
                    static_cast<float>(onnx_detail::scalarOf(g_.constant(in[2])).value_or(0));
            if (input(3) >= 0) {
                const auto axes = g_.constant(in[3]).toInt64s();
                std::vector<int64_t> full(2 * x.size(), 0);
                if (pads.size() != 2 * axes.size())
                    return err(StatusCode::kInvalidArgument, desc + ": pads/axes lengths");
                for (size_t k = 0; k < axes.size(); ++k) {
                    const int64_t ax = axes[k] < 0 ? axes[k] + int64_t(x.size()) : axes[k];
                    full[ax] = pads[k];
                    full[x.size() + ax] = pads[axes.size() + k];
                }
                pads = full;
            }
        }
        if (pads.size() != 2 * x.size())
            return err(StatusCode::kInvalidArgument, desc + ": " + std::to_string(pads.size()) +
                                                         " pads for rank " +
                                                         std::to_string(x.size()));
        n.pad.pads_begin.assign(pads.begin(), pads.begin() + x.size());
        n.pad.pads_end.assign(pads.begin() + x.size(), pads.end());
        n.inputs = {in[0]};
    } else if (op == "Identity" || op == "Dropout") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kIdentity;
        if (op == "Dropout") {
            a.ignore({"ratio", "seed", "is_test"});
            if (input(2) >= 0 && (!g_.isConstant(in[2]) ||
                                  onnx_detail::scalarOf(g_.constant(in[2])).value_or(1) != 0))
                return err(StatusCode::kUnsupported, desc + ": training_mode; export in eval()");
            dropExtraOutputs("dropout mask");
        }
        n.inputs = {in[0]};
    } else if (op == "Cast") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        const int64_t to = a.getInt("to", 1);
        a.ignore({"saturate"});
        if (to != onnx::TensorProto_DataType_FLOAT)
            return err(StatusCode::kUnsupported, desc + ": cast of activations to ONNX type " +
                                                     std::to_string(to) +
                                                     " (voxseg computes activations in float32)");
        n.op = OpKind::kIdentity;
    } else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kReshape;
        const Shape x = shapeOf(0);
        Shape target;
        if (op == "Reshape") {
            VOXSEG_RETURN_IF_ERROR(need(2));
            VOXSEG_RETURN_IF_ERROR(needConstant(1, "the target shape"));
            target = g_.constant(in[1]).toInt64s();
            if (a.getInt("allowzero", 0) != 0 &&
                std::find(target.begin(), target.end(), 0) != target.end())
                return err(StatusCode::kUnsupported, desc + ": allowzero with a 0 in the shape");
            for (size_t i = 0; i < target.size(); ++i)
                if (target[i] == 0 && i < x.size()) target[i] = x[i];
        } else if (op == "Flatten") {
            int64_t axis = a.getInt("axis", 1);
            if (axis < 0) axis += static_cast<int64_t>(x.size());
            int64_t outer = 1;
            for (int64_t i = 0; i < axis; ++i) outer *= x[i];
            target = {outer, numel(x) / std::max<int64_t>(outer, 1)};
        } else {
            std::vector<int64_t> axes;
            if (opset_ >= 13) {
                VOXSEG_RETURN_IF_ERROR(needConstant(1, "axes"));
                if (input(1) >= 0) axes = g_.constant(in[1]).toInt64s();
            } else {
                axes = a.getInts("axes");
            }
            const bool unsq = op == "Unsqueeze";
            const size_t rank = unsq ? x.size() + axes.size() : x.size();
            for (int64_t& ax : axes) ax = ax < 0 ? ax + static_cast<int64_t>(rank) : ax;
            size_t j = 0;
            for (size_t i = 0; i < rank; ++i) {
                const bool listed =
                    std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
                if (unsq) {
                    target.push_back(listed ? 1 : x[j++]);
                } else if (!((axes.empty() && x[i] == 1) || (listed && x[i] == 1))) {
                    target.push_back(x[i]);
                }
            }
        }
        // A target that keeps the batch dim copies it (0), so the graph works for any batch.
        if (!target.empty() && !x.empty() && target[0] == x[0]) target[0] = 0;
        n.shape = target;
        n.inputs = {in[0]};
    } else if (op == "Transpose") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kTranspose;
        const size_t rank = shapeOf(0).size();
        n.perm = a.getInts("perm");
        if (n.perm.empty())
            for (size_t i = 0; i < rank; ++i) n.perm.push_back(static_cast<int64_t>(rank - 1 - i));
    } else if (op == "Slice") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kSlice;
        if (opset_ >= 10) {
            VOXSEG_RETURN_IF_ERROR(need(3));
            for (size_t k = 1; k < 5; ++k) VOXSEG_RETURN_IF_ERROR(needConstant(k, "slice bounds"));
            n.slice_starts = g_.constant(in[1]).toInt64s();
            n.slice_ends = g_.constant(in[2]).toInt64s();
            if (input(3) >= 0) n.slice_axes = g_.constant(in[3]).toInt64s();
            if (input(4) >= 0) n.slice_steps = g_.constant(in[4]).toInt64s();
        } else {
            n.slice_starts = a.getInts("starts");
            n.slice_ends = a.getInts("ends");
            n.slice_axes = a.getInts("axes");
        }
        for (int64_t& ax : n.slice_axes)
            if (ax < 0) ax += static_cast<int64_t>(shapeOf(0).size());
        n.inputs = {in[0]};
    } else if (op == "Clip") {
        VOXSEG_RETURN_IF_ERROR(need(1));
        n.op = OpKind::kClip;
        n.clip_min = -std::numeric_limits<float>::infinity();
        n.clip_max = std::numeric_limits<float>::infinity();
        if (opset_ < 11) {
            n.clip_min = a.getFloat("min", n.clip_min);
            n.clip_max = a.getFloat("max", n.clip_max);
        } else {
            for (size_t k = 1; k < 3; ++k) VOXSEG_RETURN_IF_ERROR(needConstant(k, "min/max"));
            for (size_t k = 1; k < 3; ++k)
                if (input(k) >= 0 && !onnx_detail::scalarOf(g_.constant(in[k])))
                    return err(StatusCode::kInvalidArgument, desc + ": min/max must be scalars");
            if (input(1) >= 0) n.clip_min = float(*onnx_detail::scalarOf(g_.constant(in[1])));
            if (input(2) >= 0) n.clip_max = float(*onnx_detail::scalarOf(g_.constant(in[2])));
        }
        n.inputs = {in[0]};
    } else {
        return err(StatusCode::kUnsupported,
                   desc + ": operator '" + op + "' is not supported by voxseg");
    }
    VOXSEG_RETURN_IF_ERROR(a.checkAllKnown());
    for (ValueId v : n.inputs)
        if (v >= 0 && !g_.isConstant(v) && g_.values[v].dtype != DType::kFloat32)
            return err(StatusCode::kUnsupported, desc + ": non-float activation input");

    const bool all_constant = std::all_of(n.inputs.begin(), n.inputs.end(),
                                          [&](ValueId v) { return v < 0 || g_.isConstant(v); });
    if (all_constant) return foldWithReference(n, proto);
    // Integer constants feeding a computing op (e.g. a Mul by a shape value) become float.
    for (ValueId& v : n.inputs)
        if (v >= 0 && g_.isConstant(v) && g_.constant(v).dtype() != DType::kFloat32)
            v = constantValue(
                g_.values[v].name + "_f32",
                Tensor::fromFloats(g_.constant(v).shape(), g_.constant(v).toFloats()));
    return addNode(std::move(n), proto.output(0));
}

Result<Graph> Importer::run(const onnx::ModelProto& model) {
    if (!model.has_graph()) return err(StatusCode::kCorruptData, "ONNX model has no graph");
    for (const auto& o : model.opset_import())
        if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = static_cast<int>(o.version());
    if (opset_ == 0) return err(StatusCode::kCorruptData, "ONNX model declares no opset");
    if (opset_ < kMinOpset || opset_ > kMaxOpset)
        return err(StatusCode::kUnsupported, "ONNX opset " + std::to_string(opset_) +
                                                 " is not supported (" + std::to_string(kMinOpset) +
                                                 "-" + std::to_string(kMaxOpset) +
                                                 "); re-export with opset 17");
    const auto& graph = model.graph();
    VOXSEG_RETURN_IF_ERROR(readInputs(graph));
    for (int i = 0; i < graph.node_size(); ++i)
        VOXSEG_RETURN_IF_ERROR(importNode(graph.node(i), static_cast<size_t>(i)));
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
    onnx_detail::pruneDeadNodes(g_);
    onnx_detail::fuseGroupNormPattern(g_);
    std::vector<Shape> shapes;
    for (ValueId v : g_.inputs) shapes.push_back(g_.values[v].shape);
    const Status s = g_.inferShapes(shapes);
    if (!s.isOk()) return Status(s.code(), s.message(), subject_);
    return std::move(g_);
}

}  // namespace

Result<Graph> importOnnxBytes(std::string_view bytes, const OnnxImportOptions& options,
                              const std::string& subject) {
    onnx::ModelProto model;
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
        return unsupported("ONNX model larger than 2 GB", subject);
    if (bytes.empty() || !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
        return corruptData("not a valid ONNX model (truncated, or not an ONNX protobuf file)",
                           subject);
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

Result<Graph> importOnnx(const std::filesystem::path& path, const OnnxImportOptions& options) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return notFound("ONNX model not found", path.string());
    std::ifstream f(path, std::ios::binary);
    if (!f) return ioError("cannot open ONNX model", path.string());
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) return ioError("error reading ONNX model", path.string());
    return importOnnxBytes(ss.str(), options, path.string());
}

}  // namespace voxseg::engine
