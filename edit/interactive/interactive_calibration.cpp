#include "edit/interactive/interactive_calibration.h"

#include "core/log.h"
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/simulated_clicks.h"
#include "pipeline/calibrated_package.h"
#include "pipeline/calibration_record.h"
#include "pipeline/label_map_agreement.h"
#include "pipeline/segment.h"
#include "pipeline/segmentation_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace voxseg::edit::interactive {
namespace {

constexpr const char* kComponent = "calibrate";

// A case's image and its structures (label value, 0/1 mask in (z, y, x) order), largest first.
struct LoadedCase {
    Volume image;
    std::vector<std::pair<int, std::vector<uint8_t>>> structures;
};

Result<LoadedCase> loadCase(const InteractiveCalibrationCase& c, int max_structures,
                            const io::DicomLoadOptions& dicom) {
    auto study = pipeline::loadStudy(c.image, c.series, dicom);
    if (!study.isOk()) return study.status().withContext("case " + c.id);
    const io::SeriesCandidate* series = study->series ? &*study->series : nullptr;
    auto seg = pipeline::readSegmentationFile(c.labels, study->volume.geometry(), series);
    if (!seg.isOk()) return seg.status().withContext("case " + c.id + ": labels");
    const Volume& lab = seg->label_map;
    const int64_t n = lab.geometry().voxelCount();
    std::map<int, int64_t> counts;
    std::vector<int> values(static_cast<size_t>(n));
    visitPixels(lab, [&](const auto* p) {
        for (int64_t i = 0; i < n; ++i) values[i] = static_cast<int>(p[i]);
    });
    for (const int v : values)
        if (v != 0) ++counts[v];
    if (counts.empty())
        return invalidArgument("case " + c.id + ": the label map has no structure to click on",
                               c.labels);
    std::vector<std::pair<int64_t, int>> order;
    for (const auto& [v, count] : counts) order.push_back({-count, v});
    std::sort(order.begin(), order.end());
    if (max_structures > 0 && static_cast<int>(order.size()) > max_structures)
        order.resize(static_cast<size_t>(max_structures));
    LoadedCase out;
    out.image = std::move(study->volume);
    for (const auto& [minus_count, v] : order) {
        std::vector<uint8_t> mask(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) mask[i] = values[i] == v;
        out.structures.push_back({v, std::move(mask)});
    }
    return out;
}

Result<std::unique_ptr<InteractiveModel>> loadModel(const std::filesystem::path& folder,
                                                    engine::Precision precision,
                                                    const InteractiveCalibrateOptions& o,
                                                    engine::ActivationObserver observer = {}) {
    InteractiveModelOptions mo;
    mo.precision = precision;
    mo.num_threads = o.calibrate.segment.threads;
    mo.observer = std::move(observer);
    mo.int8_validation_run = true;  // the staged record has no held-back result yet
    return InteractiveModel::load(folder, mo);
}

// The clicks of each structure of the calibration cases on the observed fp32 network.
Status observeSessions(InteractiveModel& model,
                       const std::vector<InteractiveCalibrationCase>& cases,
                       const InteractiveCalibrateOptions& o, const Progress& progress) {
    for (size_t i = 0; i < cases.size(); ++i) {
        const Progress p =
            pipeline::caseProgress(progress, i, cases.size(), "calibrating " + cases[i].id);
        VOXSEG_ASSIGN_OR_RETURN(const LoadedCase c,
                                loadCase(cases[i], o.max_structures, o.calibrate.dicom));
        InteractiveSession session(model.spec(), model.forward());
        VOXSEG_RETURN_IF_ERROR(session.setImage(c.image).withContext("case " + cases[i].id));
        for (size_t s = 0; s < c.structures.size(); ++s) {
            p.report(static_cast<double>(s) / c.structures.size(),
                     fmt::format("label {}", c.structures[s].first));
            VOXSEG_RETURN_IF_ERROR(p.checkCancelled());
            VOXSEG_RETURN_IF_ERROR(session.resetInteractions());
            auto r = simulateClicks(session, c.structures[s].second, 1 + o.corrections);
            if (!r.isOk()) return r.status().withContext("case " + cases[i].id);
        }
        log::info(kComponent, "calibration case {} ({}/{}): {} structures observed", cases[i].id,
                  i + 1, cases.size(), c.structures.size());
    }
    return Status::ok();
}

Volume asLabelMap(const Volume& image, const std::vector<uint8_t>& mask) {
    Volume v = Volume::allocate<uint8_t>(image.geometry());
    std::copy(mask.begin(), mask.end(), v.data<uint8_t>());
    return v;
}

// Per held-back structure: the fp32 session's clicks replayed on the int8 network, the objects
// after the last click compared.
Result<std::vector<pipeline::HeldBackResult>> validateHeldBack(
    InteractiveModel& fp32, InteractiveModel& int8,
    const std::vector<InteractiveCalibrationCase>& cases, const InteractiveCalibrateOptions& o,
    const Progress& progress) {
    std::vector<pipeline::HeldBackResult> out;
    for (size_t i = 0; i < cases.size(); ++i) {
        const Progress p =
            pipeline::caseProgress(progress, i, cases.size(), "validating " + cases[i].id);
        VOXSEG_ASSIGN_OR_RETURN(const LoadedCase c,
                                loadCase(cases[i], o.max_structures, o.calibrate.dicom));
        InteractiveSession reference(fp32.spec(), fp32.forward());
        InteractiveSession candidate(int8.spec(), int8.forward());
        VOXSEG_RETURN_IF_ERROR(reference.setImage(c.image).withContext("case " + cases[i].id));
        VOXSEG_RETURN_IF_ERROR(candidate.setImage(c.image).withContext("case " + cases[i].id));
        for (size_t s = 0; s < c.structures.size(); ++s) {
            const auto& [label, truth] = c.structures[s];
            p.report(static_cast<double>(s) / c.structures.size(), fmt::format("label {}", label));
            VOXSEG_RETURN_IF_ERROR(p.checkCancelled());
            VOXSEG_RETURN_IF_ERROR(reference.resetInteractions());
            VOXSEG_RETURN_IF_ERROR(candidate.resetInteractions());
            VOXSEG_ASSIGN_OR_RETURN(const SimulatedSession clicks,
                                    simulateClicks(reference, truth, 1 + o.corrections));
            VOXSEG_RETURN_IF_ERROR(replayClicks(candidate, clicks.clicks));
            VOXSEG_ASSIGN_OR_RETURN(
                pipeline::LabelMapAgreement a,
                pipeline::compareLabelMaps(asLabelMap(c.image, reference.target()),
                                           asLabelMap(c.image, candidate.target()), {1}));
            const double truth_fp32 = clicks.dice.back();
            const double truth_int8 = diceScore(candidate.target(), truth);
            log::info(kComponent,
                      "held-back case {} label {}: {} clicks, Dice int8 vs fp32 {:.4f}; against "
                      "the labels fp32 {:.4f}, int8 {:.4f}",
                      cases[i].id, label, clicks.clicks.size(), a.labels.front().dice.value_or(1.0),
                      truth_fp32, truth_int8);
            out.push_back({fmt::format("{}/{}", cases[i].id, label), std::move(a)});
        }
    }
    return out;
}

}  // namespace

Result<pipeline::CalibrateReport> calibrateInteractivePackage(
    const std::filesystem::path& package, const std::vector<InteractiveCalibrationCase>& cases,
    const std::filesystem::path& output, const InteractiveCalibrateOptions& o,
    const Progress& progress) {
    const pipeline::CalibrateOptions& co = o.calibrate;
    VOXSEG_RETURN_IF_ERROR(pipeline::checkCalibrationGate(co.gate));
    if (o.corrections < 0) return invalidArgument("corrections must be >= 0");
    std::vector<pipeline::CalibrationCase> listed;
    std::map<std::string, const InteractiveCalibrationCase*> by_id;
    for (const InteractiveCalibrationCase& c : cases) {
        if (c.labels.empty())
            return invalidArgument("case " + c.id +
                                   ": an interactive package calibrates on click sessions and "
                                   "needs each case's label map (the structures to click on): "
                                   "give it as the manifest's channel:labels column");
        listed.push_back({c.id, c.image, c.series, {}});
        by_id[c.id] = &c;
    }
    VOXSEG_ASSIGN_OR_RETURN(const pipeline::CalibrationSplit split,
                            pipeline::splitCalibrationCases(listed, co.held_back, co.min_cases));
    const auto pick = [&](const std::vector<pipeline::CalibrationCase>& part) {
        std::vector<InteractiveCalibrationCase> out;
        for (const auto& c : part) out.push_back(*by_id.at(c.id));
        return out;
    };
    // The network as the session compiles it: its tensor names are what the record keys.
    VOXSEG_ASSIGN_OR_RETURN(auto plain, loadModel(package, engine::Precision::kFloat32, o));
    VOXSEG_ASSIGN_OR_RETURN(pipeline::CalibratedPackageDraft draft,
                            pipeline::CalibratedPackageDraft::create(package, output));
    engine::LoadedModel loaded;
    loaded.package = plain->package();
    loaded.graphs = {plain->graph()};
    auto candidates = pipeline::int8Candidates(loaded, co.keep_float, co.int8_upsampling);
    if (!candidates.isOk()) return candidates.status().withContext(package.string());
    if (candidates->tensors.empty())
        return unsupported("model " + loaded.package.name +
                               " has no convolution int8 can run besides those --keep-float "
                               "keeps float: nothing to calibrate",
                           package.string());
    log::info(kComponent, "model {}: {} tensors to calibrate on {} cases, {} held back",
              loaded.package.name, candidates->tensors.size(), split.calibration.size(),
              split.held_back.size());

    pipeline::ActivationObservations observed;
    {
        const auto norm_inputs = co.norm_inputs_s8 ? candidates->norm_inputs
                                                   : std::vector<engine::quant::Int8NormInput>{};
        VOXSEG_ASSIGN_OR_RETURN(auto observing,
                                loadModel(package, engine::Precision::kFloat32, o,
                                          observed.observer(candidates->tensors, norm_inputs)));
        VOXSEG_RETURN_IF_ERROR(
            observeSessions(*observing, pick(split.calibration), o, progress.sub(0.0, 0.6)));
    }
    pipeline::CalibrateReport report;
    report.patches = observed.patches();
    std::vector<std::string> ids;
    for (const auto& c : split.calibration) ids.push_back(c.id);
    VOXSEG_ASSIGN_OR_RETURN(report.record, observed.record(*candidates, ids, co));
    VOXSEG_RETURN_IF_ERROR(draft.setQuantization(report.record));
    auto int8 = loadModel(draft.folder(), engine::Precision::kInt8, o);
    if (!int8.isOk()) return int8.status().withContext("the calibrated package in int8");
    VOXSEG_ASSIGN_OR_RETURN(
        report.held_back,
        validateHeldBack(*plain, **int8, pick(split.held_back), o, progress.sub(0.6, 1.0)));
    report.label_names = {loaded.package.labels.empty() ? std::string("object")
                                                        : loaded.package.labels.front().name};
    VOXSEG_RETURN_IF_ERROR(pipeline::finishCalibration(report, draft, co, progress));
    return report;
}

}  // namespace voxseg::edit::interactive
