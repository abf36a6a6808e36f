// What a calibrated package runs int8 with (issue 40, docs/int8.md): activation scales and zero
// points per graph tensor name, the layers that stay in float, the weight bits, and the calibration
// record with the agreement measured on held-back cases. Plain values shared by the cpu backend's
// int8 plan (engine/cpu), the layer policy (engine/quant/int8_policy.h) and model.json's reader
// and writer (engine/model/model_quantization.h). Thread-compatible.
#pragma once

#include "engine/quant/int8_scheme.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::engine {

// How calibration chose each activation range.
enum class RangeMethod { kPercentile, kMse, kMinMax };
// "percentile" | "mse" | "minmax"
inline const char* rangeMethodName(RangeMethod m) {
    switch (m) {
        case RangeMethod::kPercentile:
            return "percentile";
        case RangeMethod::kMse:
            return "mse";
        case RangeMethod::kMinMax:
            return "minmax";
    }
    return "?";
}

// Agreement of int8 with fp32 on the held-back cases (label maps, voxel by voxel).
struct HeldBackAgreement {
    std::vector<std::string> cases;
    double dice_min = 0;         // lowest per-case, per-label Dice of int8 against fp32
    double dice_mean = 0;        // mean of the per-case mean Dice
    double voxel_agreement = 0;  // share of voxels with the same label, all cases
    // The gate these figures passed (voxseg model calibrate --min-dice / --min-agreement), so the
    // record says what was required, not only what was measured; 0 in records written before it.
    double min_dice = 0;
    double min_agreement = 0;
};

struct QuantizationRecord {
    // The weight bits calibration validated, and the bits the runtime uses: 8 (CPUs with VNNI or
    // AMX only) or 7 (every CPU, identical results); cpuInt8Support, docs/int8.md.
    int weight_bits = 8;
    std::map<std::string, quant::ActivationQuant> activations;  // graph tensor name -> u8 params
    std::vector<std::string> float_layers;  // node names kept in fp32/bf16 (first, last conv...)
    // 8-bit normalisation inputs (calibrate --norm-inputs int8; int8_scheme.h): graph tensor
    // name -> its s8 scale per channel. Empty: normalisations read their input as float.
    std::map<std::string, std::vector<float>> norm_inputs;
    // int8 up-sampling (calibrate --upsampling int8; int8_policy.h, int8_upsample): the decoder's
    // k = s ConvTransposes run as int8 1x1 convolutions into their concat's u8. Their inputs are
    // in `activations` then. false: they stay float.
    bool int8_upsampling = false;
    RangeMethod method = RangeMethod::kPercentile;
    double percentile = 99.99;                                   // kPercentile only
    quant::ZeroPoints zero_points = quant::ZeroPoints::kAlways;  // calibrate --zero-points
    std::vector<std::string> calibration_cases;
    std::optional<HeldBackAgreement> held_back;  // absent: calibrated, not validated
};

}  // namespace voxseg::engine
