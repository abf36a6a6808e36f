#include "engine/backend.h"

namespace voxseg::engine {

const char* precisionName(Precision p) {
    switch (p) {
        case Precision::kFloat32:
            return "fp32";
        case Precision::kFloat16:
            return "fp16";
        case Precision::kBFloat16:
            return "bf16";
        case Precision::kAuto:
            return "auto";
        case Precision::kInt8:
            return "int8";
        case Precision::kFp8:
            return "fp8";
    }
    return "?";
}

bool usesCalibration(Precision p) { return p == Precision::kInt8 || p == Precision::kFp8; }

Result<Precision> parsePrecision(const std::string& name) {
    if (name == "auto") return Precision::kAuto;
    if (name == "fp32" || name == "float32") return Precision::kFloat32;
    if (name == "fp16" || name == "float16") return Precision::kFloat16;
    if (name == "bf16" || name == "bfloat16") return Precision::kBFloat16;
    if (name == "int8") return Precision::kInt8;
    if (name == "fp8") return Precision::kFp8;
    return invalidArgument("unknown precision '" + name +
                           "': use auto, fp32, fp16, bf16, int8 or fp8");
}

PrecisionChoice Backend::autoPrecision() const {
    return {Precision::kFloat32, name() + " backend: fp32 is its only fast precision"};
}

Status Backend::supportsInt8Weights(int) const {
    return unsupported(name() + " backend has no int8", name());
}

Status Backend::supportsNode(const Graph&, const Node&) const { return Status::ok(); }

Status Backend::supportsGraph(const Graph& graph, const std::vector<Shape>& input_shapes) const {
    Graph shaped = graph;
    VOXSEG_RETURN_IF_ERROR(shaped.inferShapes(input_shapes));
    for (const Node& node : shaped.nodes) VOXSEG_RETURN_IF_ERROR(supportsNode(shaped, node));
    return Status::ok();
}

Result<PrecisionChoice> choosePrecision(const Backend& backend, Precision requested,
                                        const ModelPrecisionHints& model, std::string* warning) {
    const std::string model_says = "model " + model.model +
                                   " requires fp32 (model.json \"precision\"" +
                                   (model.reason.empty() ? std::string(")") : "): " + model.reason);
    if (requested == Precision::kAuto) {
        if (model.requires_fp32) return PrecisionChoice{Precision::kFloat32, model_says};
        std::string int8_note;
        if (const int bits = model.int8_validated_weight_bits; bits > 0) {
            const Status int8 = backend.supportsInt8Weights(bits);
            if (int8.isOk())
                return PrecisionChoice{
                    Precision::kInt8,
                    "auto: int8: model " + model.model + " records an int8 calibration with " +
                        std::to_string(bits) +
                        "-bit weights validated on held-back cases (model.json \"quantization\")"};
            int8_note =
                " (the package's validated int8 calibration is not used: " + int8.message() + ")";
        }
        PrecisionChoice choice = backend.autoPrecision();
        choice.reason = "auto: " + choice.reason + int8_note;
        return choice;
    }
    if (!backend.supportsPrecision(requested)) {
        const std::string fp8_note =
            requested == Precision::kFp8
                ? " (fp8 runs on GPUs with FP8 tensor cores: --device cuda on sm_89 or newer, "
                  "Ada or Hopper)"
                : "";
        return unsupported(std::string("precision ") + precisionName(requested) +
                               " is not supported by backend " + backend.name() + " (" +
                               backend.deviceDescription() + ")" + fp8_note +
                               ": use --precision fp32 (or auto)",
                           backend.name());
    }
    if (model.requires_fp32 && requested != Precision::kFloat32 && warning)
        *warning = model_says + "; running " + precisionName(requested) +
                   " as asked: check the labels (tools/check_precision.py)";
    return PrecisionChoice{requested,
                           std::string("asked for (--precision ") + precisionName(requested) + ")"};
}

}  // namespace voxseg::engine
