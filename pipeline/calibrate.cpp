// `voxseg model calibrate` (calibrate.h): observe, choose ranges, validate, write.
#include "pipeline/calibrate.h"

#include "core/log.h"
#include "engine/cpu/cpu_backend.h"
#include "pipeline/calibrated_package.h"
#include "pipeline/calibration_record.h"
#include "pipeline/stage_quantization.h"

#include <fmt/format.h>

namespace voxseg::pipeline {

namespace {

constexpr const char* kComponent = "calibrate";

Status checkCalibratable(const engine::ModelPackage& m, const std::string& folder) {
    if (m.isInteractive())
        return unsupported("model " + m.name +
                               " is a promptable (interactive) package: it calibrates on "
                               "click sessions (edit/interactive/interactive_calibration.h)",
                           folder);
    return Status::ok();
}

Result<StudyInput> loadCase(const CalibrationCase& c, const Segmenter& s, const CalibrateOptions& o,
                            const Progress& progress) {
    auto in = loadStudyChannels(c.input, c.series, c.channels, s.model(), o.dicom, progress);
    if (!in.isOk()) return in.status().withContext("case " + c.id);
    return in;
}

// What every run of calibrate shares: no output files (nothing is written by these runs).
SegmentOptions runOptions(SegmentOptions o, engine::Precision precision) {
    o.precision = precision;
    o.outputs = SegmentOutputs{};
    o.outputs.statistics = false;
    o.outputs.preview = false;
    return o;
}

// The fp32 network on every calibration case, through segment's prepare and infer, observed.
Status observeCases(const std::filesystem::path& package, const std::vector<CalibrationCase>& cases,
                    const engine::ActivationObserver& observer, const CalibrateOptions& o,
                    const Progress& progress) {
    SegmentOptions so = runOptions(o.segment, engine::Precision::kFloat32);
    so.observer = observer;
    auto seg = Segmenter::create(package.string(), so);
    if (!seg.isOk()) return seg.status();
    for (size_t i = 0; i < cases.size(); ++i) {
        const Progress p = caseProgress(progress, i, cases.size(), "calibrating");
        VOXSEG_ASSIGN_OR_RETURN(const StudyInput in, loadCase(cases[i], *seg, o, p.sub(0, 0.1)));
        auto work = seg->prepare(in, cases[i].input, p.sub(0.1, 0.2));
        if (!work.isOk()) return work.status().withContext("case " + cases[i].id);
        const Status inferred = seg->infer(*work, p.sub(0.2, 1.0));
        if (!inferred.isOk()) return inferred.withContext("case " + cases[i].id);
        log::info(kComponent, "calibration case {} ({}/{}) observed", cases[i].id, i + 1,
                  cases.size());
    }
    return Status::ok();
}

// Runs one held-back case through segment (prepare, infer, finish) and returns its label map.
Result<Volume> segmentCase(Segmenter& s, const StudyInput& in, const CalibrationCase& c,
                           const Progress& p) {
    auto work = s.prepare(in, c.input, p.sub(0, 0.1));
    if (!work.isOk()) return work.status().withContext("case " + c.id);
    Status st = s.infer(*work, p.sub(0.1, 0.9));
    if (st.isOk()) st = s.finish(*work, p.sub(0.9, 1.0));
    if (!st.isOk()) return st.withContext("case " + c.id);
    return std::move(work->report.label_map);
}

Result<std::vector<HeldBackResult>> validateHeldBack(const std::filesystem::path& package,
                                                     const std::filesystem::path& staged,
                                                     const std::vector<CalibrationCase>& cases,
                                                     const CalibrateOptions& o,
                                                     const Progress& progress) {
    VOXSEG_ASSIGN_OR_RETURN(
        Segmenter reference,
        Segmenter::create(package.string(), runOptions(o.segment, engine::Precision::kFloat32)));
    SegmentOptions cand = o.candidate ? *o.candidate : o.segment;
    if (!o.candidate) cand.precision = engine::Precision::kInt8;
    cand = runOptions(cand, cand.precision);
    cand.int8_validation_run = true;  // the record being validated has no held_back yet
    auto candidate = Segmenter::create(staged.string(), cand);
    if (!candidate.isOk())
        return candidate.status().withContext("the calibrated package in " +
                                              std::string(engine::precisionName(cand.precision)));
    std::vector<int> labels;
    for (const LabelInfo& l : reference.model().labels) labels.push_back(l.value);
    std::vector<HeldBackResult> out;
    for (size_t i = 0; i < cases.size(); ++i) {
        const Progress p = caseProgress(progress, i, cases.size(), "validating");
        VOXSEG_ASSIGN_OR_RETURN(const StudyInput in,
                                loadCase(cases[i], reference, o, p.sub(0, 0.1)));
        VOXSEG_ASSIGN_OR_RETURN(const Volume fp32,
                                segmentCase(reference, in, cases[i], p.sub(0.1, 0.5)));
        VOXSEG_ASSIGN_OR_RETURN(const Volume other,
                                segmentCase(*candidate, in, cases[i], p.sub(0.5, 1.0)));
        VOXSEG_ASSIGN_OR_RETURN(LabelMapAgreement a, compareLabelMaps(fp32, other, labels));
        out.push_back({cases[i].id, std::move(a)});
        log::info(kComponent, "held-back case {} ({}/{}): voxel agreement {:.5f}", cases[i].id,
                  i + 1, cases.size(), out.back().agreement.voxelAgreement());
    }
    return out;
}

}  // namespace

Progress caseProgress(const Progress& parent, size_t i, size_t n, const std::string& what) {
    const Progress range = parent.sub(static_cast<double>(i) / n, static_cast<double>(i + 1) / n);
    const std::string prefix = fmt::format("{} {}/{}: ", what, i + 1, n);
    return Progress(
        [range, prefix](double f, std::string_view stage) {
            range.report(f, prefix + std::string(stage));
        },
        parent.token());
}

int calibrationWeightBits() { return engine::cpuInt8WeightBits(engine::cpuInt8Traits()); }

Result<CalibrateReport> calibratePackage(const std::filesystem::path& package,
                                         const std::vector<CalibrationCase>& cases,
                                         const std::filesystem::path& output,
                                         const CalibrateOptions& o, const Progress& progress) {
    VOXSEG_RETURN_IF_ERROR(checkCalibrationGate(o.gate));
    if (o.method == engine::RangeMethod::kPercentile && !(o.percentile > 50 && o.percentile <= 100))
        return invalidArgument(fmt::format("--percentile {} is not in (50, 100]", o.percentile));
    VOXSEG_ASSIGN_OR_RETURN(const CalibrationSplit split,
                            splitCalibrationCases(cases, o.held_back, o.min_cases));
    VOXSEG_ASSIGN_OR_RETURN(engine::LoadedModel loaded, engine::loadModelPackage(package));
    VOXSEG_RETURN_IF_ERROR(checkCalibratable(loaded.package, package.string()));
    // The output is checked (and the copy staged) before hours of inference, not after.
    VOXSEG_ASSIGN_OR_RETURN(CalibratedPackageDraft draft,
                            CalibratedPackageDraft::create(package, output));
    auto candidates = int8Candidates(loaded, o.keep_float, o.int8_upsampling);
    if (!candidates.isOk()) return candidates.status().withContext(package.string());
    const std::vector<std::string>& float_layers = candidates->float_layers;
    const std::vector<std::string>& tensors = candidates->tensors;
    if (tensors.empty())
        return unsupported("model " + loaded.package.name +
                               " has no convolution int8 can run besides those --keep-float "
                               "keeps float: nothing to calibrate",
                           package.string());
    log::info(kComponent, "model {}: {} tensors to calibrate on {} cases, {} held back",
              loaded.package.name, tensors.size(), split.calibration.size(),
              split.held_back.size());

    const std::vector<engine::quant::Int8NormInput> norm_inputs =
        o.norm_inputs_s8 ? candidates->norm_inputs : std::vector<engine::quant::Int8NormInput>{};
    if (o.norm_inputs_s8)
        log::info(kComponent, "8-bit normalisation inputs: {} tensors", norm_inputs.size());
    ActivationObservations observed;
    VOXSEG_RETURN_IF_ERROR(observeCases(package, split.calibration,
                                        observed.observer(tensors, norm_inputs), o,
                                        progress.sub(0.0, 0.6)));
    CalibrateReport report;
    report.patches = observed.patches();
    std::vector<std::string> ids;
    for (const CalibrationCase& c : split.calibration) ids.push_back(c.id);
    VOXSEG_ASSIGN_OR_RETURN(report.record, observed.record(*candidates, ids, o));
    VOXSEG_RETURN_IF_ERROR(draft.setQuantization(report.record));
    VOXSEG_ASSIGN_OR_RETURN(
        report.held_back,
        validateHeldBack(package, draft.folder(), split.held_back, o, progress.sub(0.6, 1.0)));
    for (const LabelInfo& l : loaded.package.labels) report.label_names.push_back(l.name);
    VOXSEG_RETURN_IF_ERROR(finishCalibration(report, draft, o, progress));
    return report;
}

Status finishCalibration(CalibrateReport& report, CalibratedPackageDraft& draft,
                         const CalibrateOptions& o, const Progress& progress) {
    report.summary = summarizeHeldBack(report.held_back);
    report.gate = applyCalibrationGate(report.summary, report.held_back, o.gate);
    if (!report.gate.isOk()) return Status::ok();  // the draft's destructor removes the copy
    report.record.held_back = report.summary;
    report.record.held_back->min_dice = o.gate.min_dice;
    report.record.held_back->min_agreement = o.gate.min_agreement;
    VOXSEG_RETURN_IF_ERROR(draft.setQuantization(report.record));
    VOXSEG_ASSIGN_OR_RETURN(report.signature, draft.commit(o.sign_key));
    progress.report(1.0, "calibrated");
    return Status::ok();
}

}  // namespace voxseg::pipeline
