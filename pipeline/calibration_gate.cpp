// The calibration gate (calibration_gate.h): summary, check and table.
#include "pipeline/calibration_gate.h"

#include <fmt/format.h>

#include <algorithm>

namespace voxseg::pipeline {

Status checkCalibrationGate(const CalibrationGate& gate) {
    if (!(gate.min_dice >= 0.0 && gate.min_dice <= 1.0))
        return invalidArgument(
            fmt::format("--min-dice {} is not in [0, 1] (the lowest Dice of int8 against fp32 "
                        "allowed on a held-back case and label)",
                        gate.min_dice));
    if (!(gate.min_agreement >= 0.0 && gate.min_agreement <= 1.0))
        return invalidArgument(
            fmt::format("--min-agreement {} is not in [0, 1] (the share of voxels int8 must "
                        "label as fp32 does)",
                        gate.min_agreement));
    return Status::ok();
}

engine::HeldBackAgreement summarizeHeldBack(const std::vector<HeldBackResult>& results) {
    engine::HeldBackAgreement s;
    s.dice_min = 1.0;
    double mean_sum = 0.0;
    int64_t voxels = 0, same = 0;
    for (const HeldBackResult& r : results) {
        s.cases.push_back(r.case_id);
        double sum = 0.0;
        int n = 0;
        for (const LabelDice& d : r.agreement.labels)
            if (d.dice) {
                s.dice_min = std::min(s.dice_min, *d.dice);
                sum += *d.dice;
                ++n;
            }
        mean_sum += n ? sum / n : 1.0;  // no label in either map: the maps agree
        voxels += r.agreement.voxels;
        same += r.agreement.same;
    }
    s.dice_mean = results.empty() ? 0.0 : mean_sum / static_cast<double>(results.size());
    s.voxel_agreement = voxels ? static_cast<double>(same) / static_cast<double>(voxels) : 0.0;
    return s;
}

Status applyCalibrationGate(const engine::HeldBackAgreement& summary,
                            const std::vector<HeldBackResult>& results,
                            const CalibrationGate& gate) {
    if (summary.dice_min < gate.min_dice) {
        std::string where;
        for (const HeldBackResult& r : results)
            for (const LabelDice& d : r.agreement.labels)
                if (d.dice && *d.dice == summary.dice_min && where.empty())
                    where = fmt::format(" (case {}, label {}: {} voxels in fp32, {} in int8)",
                                        r.case_id, d.label, d.voxels_reference, d.voxels_candidate);
        return Status(
            StatusCode::kFailedPrecondition,
            fmt::format(
                "int8 fails the accuracy gate: lowest Dice against fp32 on the held-back cases is "
                "{:.4f}{}, below --min-dice {:.4f}",
                summary.dice_min, where, gate.min_dice));
    }
    if (summary.voxel_agreement < gate.min_agreement)
        return Status(
            StatusCode::kFailedPrecondition,
            fmt::format(
                "int8 fails the accuracy gate: it labels {:.5f} of the held-back voxels as fp32 "
                "does, below --min-agreement {:.5f}",
                summary.voxel_agreement, gate.min_agreement));
    return Status::ok();
}

std::string heldBackTable(const std::vector<HeldBackResult>& results,
                          const std::vector<std::string>& label_names,
                          const engine::HeldBackAgreement& summary, const CalibrationGate& gate) {
    std::string t = fmt::format("{:<20}", "held-back case");
    for (const std::string& name : label_names) t += fmt::format(" {:>12.12}", name);
    t += fmt::format(" {:>10}\n", "agreement");
    for (const HeldBackResult& r : results) {
        t += fmt::format("{:<20.20}", r.case_id);
        for (const LabelDice& d : r.agreement.labels)
            t += d.dice ? fmt::format(" {:>12.4f}", *d.dice) : fmt::format(" {:>12}", "-");
        t += fmt::format(" {:>10.5f}\n", r.agreement.voxelAgreement());
    }
    t += fmt::format(
        "Dice int8 vs fp32: lowest {:.4f} (gate >= {:.4f}), mean {:.4f}; voxel agreement "
        "{:.5f} (gate >= {:.5f})\n",
        summary.dice_min, gate.min_dice, summary.dice_mean, summary.voxel_agreement,
        gate.min_agreement);
    return t;
}

}  // namespace voxseg::pipeline
