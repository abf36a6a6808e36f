// model.json "quantization" (issue 40, docs/int8.md): what `--precision int8` runs a package with
// and the evidence that it may. Activation scales and zero points per graph tensor name (from
// calibration), the layers that stay in float, and the calibration record: the cases it used and
// the agreement with fp32 measured on held-back cases it did not use. It lives in model.json, so
// the package's signature covers it as it covers the rest of that file.
//
// int8PackageSupport() is the package's half of the int8 decision (the CPU's half is
// cpuInt8Support, engine/cpu/cpu_backend.h). Plain values; thread-compatible.
#pragma once

#include "core/status.h"
#include "engine/quant/quantization_record.h"

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine {

// Reads the section at `key` ("quantization") of `j` for the model.json at `source` (messages
// name the key path, e.g. "quantization.activations['enc.0'].zero_point"). Checks: every scale
// positive and finite, zero points integers in [0, 255], at least one activation and one
// calibration case, held-back cases disjoint from the calibration cases, Dice and agreement in
// [0, 1].
Result<QuantizationRecord> readQuantization(const nlohmann::json& j, const std::string& key,
                                            const std::string& source);
namespace detail {
class Reader;  // engine/model/model_json.h
// The same, into `out`, for the model.json reader (which keeps the first error).
void readQuantization(Reader& r, const nlohmann::json& j, const std::string& key,
                      QuantizationRecord& out);
}  // namespace detail
nlohmann::json quantizationJson(const QuantizationRecord& q);

// Whether `model`'s package can run in int8 on a CPU that multiplies `cpu_weight_bits`-bit
// weights exactly (cpuInt8WeightBits, engine/cpu/cpu_backend.h; 8 skips that check): ok with a
// validated record; kUnsupported saying what is missing (no record: calibrate first; no held-back
// measurement: calibrate with held-back cases; 8-bit weights on a 7-bit CPU: recalibrate on this
// CPU or with --weight-bits 7) and what to run instead.
Status int8PackageSupport(const std::optional<QuantizationRecord>& q, const std::string& model,
                          int cpu_weight_bits = 8);

}  // namespace voxseg::engine
