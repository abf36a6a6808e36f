// The accuracy gate of `voxseg model calibrate` (issue 40, docs/int8.md "Calibration and
// accuracy"): int8 against fp32 on held-back cases calibration did not use, summarised into
// model.json's held_back record (engine::HeldBackAgreement), checked against the gate, and
// printed as a table. A package is recorded as validated for int8 only when the gate passes.
// Plain values and functions; thread-safe.
#pragma once

#include "core/status.h"
#include "engine/model/model_quantization.h"
#include "pipeline/label_map_agreement.h"

#include <string>
#include <vector>

namespace voxseg::pipeline {

// Defaults from issue 40's targets: brain extraction Dice against fp32 >= 0.995 per case, which
// every label of every held-back case must reach here, and at most one voxel in 1000 changed.
struct CalibrationGate {
    double min_dice = 0.995;       // lowest per-case, per-label Dice allowed
    double min_agreement = 0.999;  // share of voxels with the same label, all cases together
};
// kInvalidArgument naming the option when a bound is outside [0, 1].
Status checkCalibrationGate(const CalibrationGate& gate);

struct HeldBackResult {
    std::string case_id;
    LabelMapAgreement agreement;
};

// The record's held_back section: dice_min over every case and label with a Dice (a label
// neither map has counts for nothing), dice_mean the mean over cases of each case's mean Dice,
// voxel_agreement over every voxel of every case.
engine::HeldBackAgreement summarizeHeldBack(const std::vector<HeldBackResult>& results);

// ok when `summary` meets `gate`; else kFailedPrecondition saying which bound failed, by how
// much, and on which case and label (from `results`).
Status applyCalibrationGate(const engine::HeldBackAgreement& summary,
                            const std::vector<HeldBackResult>& results,
                            const CalibrationGate& gate);

// The table printed after validation: one row per case (Dice per label by name, voxel
// agreement), then the summary and the gate. `label_names[i]` names results' labels[i].
std::string heldBackTable(const std::vector<HeldBackResult>& results,
                          const std::vector<std::string>& label_names,
                          const engine::HeldBackAgreement& summary, const CalibrationGate& gate);

}  // namespace voxseg::pipeline
