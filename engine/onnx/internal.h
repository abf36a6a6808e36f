// Internal to onnx_import: attribute access, TensorProto decoding and constant folding of the
// shape subgraphs ONNX exports contain. Not a public header (it includes the protobuf types).
#pragma once

#include "core/status.h"
#include "engine/graph/graph.h"
#include "engine/graph/tensor.h"

#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h (ONNX_ML=1)

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace voxseg::engine::onnx_detail {

// Typed access to a node's attributes; every getter records the name as known so that
// checkAllKnown() can reject attributes voxseg would otherwise silently ignore.
class Attrs {
  public:
    Attrs(const onnx::NodeProto& node, std::string node_desc)
        : node_(node), desc_(std::move(node_desc)) {}

    bool has(const std::string& name) const;
    int64_t getInt(const std::string& name, int64_t def);
    float getFloat(const std::string& name, float def);
    std::string getString(const std::string& name, const std::string& def);
    std::vector<int64_t> getInts(const std::string& name, const std::vector<int64_t>& def = {});
    std::vector<float> getFloats(const std::string& name);
    const onnx::TensorProto* getTensor(const std::string& name);
    // Marks attributes as accepted without reading them (e.g. BatchNorm momentum).
    void ignore(std::initializer_list<const char*> names);
    // kUnsupported naming the first attribute nobody asked for.
    Status checkAllKnown() const;
    // "Conv node 'name'" for messages.
    const std::string& desc() const { return desc_; }

  private:
    const onnx::AttributeProto* find(const std::string& name);
    const onnx::NodeProto& node_;
    std::string desc_;
    std::set<std::string> known_;
};

// Upper bound on elements of a tensor created while folding (a corrupt shape must not make
// the importer allocate gigabytes).
constexpr int64_t kMaxFoldedElements = int64_t{1} << 26;

// Decodes an initializer / Constant value. Float types become float32, integer types int64,
// bool stays bool. External data is kUnsupported.
Result<Tensor> tensorFromProto(const onnx::TensorProto& proto, const std::string& what);

// Evaluates `node` when all its (present) inputs are constant and it is one of the ops that
// appear in shape computations (Gather, Unsqueeze, Concat, Cast, Range, Where, integer
// arithmetic, ...). Returns std::nullopt when the op is not one of those; errors for bad inputs.
Result<std::optional<std::vector<Tensor>>> foldConstantNode(const onnx::NodeProto& node,
                                                            const std::vector<const Tensor*>& in,
                                                            int opset, const std::string& desc);

}  // namespace voxseg::engine::onnx_detail
