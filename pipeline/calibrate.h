// `voxseg model calibrate` (issue 40, docs/int8.md "Calibration and accuracy"): INT8 activation
// scales for a model package, measured on representative cases through the real segment
// pipeline, validated on held-back cases, written into a new package.
//
//   1. the cases are split (calibration_cases.h): held-back cases are never calibrated on;
//   2. the fp32 network runs on each calibration case through Segmenter::prepare and ::infer (the
//      pre-processing and sliding window `voxseg segment` runs), with an activation observer
//      (engine/activation_observer.h) filling one histogram per tensor the int8 convolutions
//      read (engine/quant/int8_policy.h); each tensor's range is chosen from its histogram
//      (calibration_ranges.h: percentile by default, mse or minmax) and turned into a u8 scale
//      and zero point (engine/quant/int8_scheme.h);
//   3. the record goes into a staged copy of the package (calibrated_package.h); segment runs
//      each held-back case in fp32 on the input package and in int8 on the staged copy, and the
//      label maps are compared (Dice per label, voxel agreement: calibration_gate.h);
//   4. gate met: held_back is recorded, the copy is signed when a key is given and renamed into
//      place. Gate missed: the staged copy is removed and nothing is written.
//
// Format version 1 packages with one network; staged and ensemble packages are refused (their
// graphs' tensor names would share one "activations" map). Not thread-safe: one calibration per
// call; the sliding window uses the threads SegmentOptions asks for.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "engine/model/model_quantization.h"
#include "engine/quant/int8_policy.h"
#include "io/dicom_series.h"
#include "pipeline/calibration_cases.h"
#include "pipeline/calibration_gate.h"
#include "pipeline/segment.h"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace voxseg::pipeline {

struct CalibrateOptions {
    // mse by default: on the shipped hippocampus and CT phantom models it gave the highest
    // held-back Dice against fp32 of the three methods (docs/int8.md "Calibration and
    // accuracy"): it clips a tail only where clipping costs less error than coarser steps.
    engine::RangeMethod method = engine::RangeMethod::kMse;
    double percentile = 99.99;  // kPercentile: keeps all but 1 value in 10,000
    int min_cases = 8;          // calibration cases required (held-back cases come on top)
    // The weights' bits the record validates (model.json quantization.weight_bits): 8 needs a
    // CPU with VNNI or AMX to run (and to validate on), 7 runs exactly on every CPU
    // (engine::cpuInt8Support). calibrationWeightBits() gives this CPU's.
    int weight_bits = 8;
    // 8-bit normalisation inputs (--norm-inputs int8; engine/quant/int8_scheme.h): Convs whose
    // output only an InstanceNorm/GroupNorm reads write s8 per channel, scales chosen per channel
    // by `method` from the magnitudes observed. Faster (the norm reads a byte per value, not
    // bf16's two, in both its passes), one rounding more; the held-back gate decides.
    bool norm_inputs_s8 = false;
    // Which of the first and last convolution stay float (--keep-float): both by default (the
    // image's few channels at full precision, the logits the labels come from); NNCF quantises
    // both. The gate decides.
    engine::quant::Int8FloatEnds keep_float;
    // Which activations get a zero point (--zero-points; engine/quant/int8_scheme.h): always
    // (default), or where-needed (LeakyReLU outputs whose negatives are small go without:
    // faster convolutions on AMX, those negatives clamped to 0; the gate decides).
    engine::quant::ZeroPoints zero_points = engine::quant::ZeroPoints::kAlways;
    // The decoder's k = s up-sampling in int8 too (--upsampling int8; int8_policy.h): faster
    // (bytes in, the concat's u8 out), its input and weights one rounding more; the gate decides.
    bool int8_upsampling = false;
    HeldBackSpec held_back;
    CalibrationGate gate;
    // Device, threads, batch, overlap, TTA for every run; precision is set per run (fp32 for
    // the calibration and the reference, int8 for the candidate).
    SegmentOptions segment;
    // What the held-back cases compare with fp32: `segment` with int8 when unset. Tests give
    // another run here (e.g. other overlaps) to exercise the gate without int8.
    std::optional<SegmentOptions> candidate;
    io::DicomLoadOptions dicom;
    std::optional<std::filesystem::path> sign_key;  // signs the new package
};

struct CalibrateReport {
    engine::QuantizationRecord record;  // as written (held_back set when the gate passed)
    std::vector<HeldBackResult> held_back;
    std::vector<std::string> label_names;  // in held_back's label order
    engine::HeldBackAgreement summary;
    Status gate;            // ok: the gate passed and the package was written
    std::string signature;  // what happened to the signature (one line), when written
    int64_t patches = 0;    // calibration patches observed
};

// Progress of case `i` of `n` inside `parent`, its stages prefixed with "what i/n: " (the
// calibration's cases, and an interactive package's).
Progress caseProgress(const Progress& parent, size_t i, size_t n, const std::string& what);

// The weight bits this CPU's int8 kernels multiply exactly: 8 with VNNI or AMX, else 7.
int calibrationWeightBits();

class CalibratedPackageDraft;
// The end of a calibration (this one's and an interactive package's): report.summary from
// report.held_back, report.gate from `o.gate`; when it passes, the record's held-back result goes
// into the draft, which is signed (o.sign_key) and committed (report.signature). A missed gate
// leaves the draft uncommitted (its destructor removes it). Errors: writing or committing.
Status finishCalibration(CalibrateReport& report, CalibratedPackageDraft& draft,
                         const CalibrateOptions& o, const Progress& progress);

// Calibrates `package` on `cases` and writes the result to `output` (which must not exist).
// Errors (unreadable cases, too few, unsupported packages, a tensor with no usable range) come
// back as a Status, with nothing written; a missed gate comes back as report.gate with nothing
// written, so the caller can still print the table.
Result<CalibrateReport> calibratePackage(const std::filesystem::path& package,
                                         const std::vector<CalibrationCase>& cases,
                                         const std::filesystem::path& output,
                                         const CalibrateOptions& options,
                                         const Progress& progress = {});

}  // namespace voxseg::pipeline
