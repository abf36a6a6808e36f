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
    }
    return "?";
}

Result<Precision> parsePrecision(const std::string& name) {
    if (name == "fp32" || name == "float32") return Precision::kFloat32;
    if (name == "fp16" || name == "float16") return Precision::kFloat16;
    if (name == "bf16" || name == "bfloat16") return Precision::kBFloat16;
    return invalidArgument("unknown precision '" + name + "': use fp32, fp16 or bf16");
}

}  // namespace voxseg::engine
