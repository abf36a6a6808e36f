// Synthetic CT studies for the demo, tests, benchmarks and the demo model's training data: an
// abdomen/lower-thorax phantom (body outline with subcutaneous fat and muscle, lungs with a
// vessel-like texture, liver, spleen, kidneys with cortex, vertebral column with cortical rim and
// spinal canal, aorta and vena cava, bowel, optional table) in air, with Gaussian noise and mild
// in-plane smoothing, random organ shapes (smooth polynomial and displacement-field deformations,
// random sizes) and a random pose (rotation, translation, patient size), plus its ground-truth
// label map on the same grid. Everything is derived from the seed: same spec, same voxels.
//
// makeCtPhantom() only computes (no I/O); writeCtPhantomStudy() writes a DICOM CT series
// (DCMTK, CT Image IOD, HU through RescaleSlope/Intercept) and the label map as NIfTI.
// Not a real patient: identifiers are synthetic. Thread safety: reentrant (uses its own threads).
// Units: HU, mm, LPS (x to the patient's left, y posterior, z superior).
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace voxseg::io {

// Label values of the ground truth (documented in docs/ct-phantom.md and model.json).
enum class PhantomLabel : uint8_t {
    kBackground = 0,
    kLiver = 1,
    kSpleen = 2,
    kKidneyLeft = 3,
    kKidneyRight = 4,
    kLungLeft = 5,
    kLungRight = 6,
    kSpine = 7,  // vertebral bodies and posterior elements (not discs, not the canal)
    kAorta = 8,
};
constexpr int kPhantomLabelCount = 8;  // foreground labels 1..8
const char* phantomLabelName(int label);

enum class ContrastPhase { kNone, kArterial };

struct CtPhantomSpec {
    uint32_t seed = 1;
    std::array<int64_t, 3> size{256, 256, 150};  // columns (i), rows (j), slices (k)
    Vec3 spacing{1.5, 1.5, 2.0};                 // mm along i, j, k
    // Standard deviation of the final (smoothed) noise in HU; < 0: random in [10, 20].
    double noise_hu = -1.0;
    bool table = true;
    int threads = 0;  // 0: all cores
};

// The intensities the phantom drew for this seed (HU before noise; the ranges they are drawn
// from are in ct_phantom.cpp, kHuRanges, and checked by tests/io/ct_phantom_test.cpp).
struct PhantomTissues {
    double fat = 0, muscle = 0, lung = 0, liver = 0, spleen = 0, kidney_medulla = 0,
           kidney_cortex = 0, bone_cancellous = 0, bone_cortical = 0, aorta = 0;
};

struct CtPhantom {
    Volume hu;      // int16, HU, identity direction, centred on the origin
    Volume labels;  // uint8, PhantomLabel values, same geometry
    ContrastPhase phase = ContrastPhase::kNone;
    PhantomTissues tissues;
    double noise_hu = 0;
    double yaw_deg = 0, pitch_deg = 0, roll_deg = 0;  // pose: rotations about z, x, y
    Vec3 shift_mm{0, 0, 0};                           // pose: translation
    double body_scale = 1, length_scale = 1;          // patient size (in-plane, along z)
};

Result<CtPhantom> makeCtPhantom(const CtPhantomSpec& spec);

struct PhantomWriteOptions {
    bool dicom = true;         // <folder>/dicom/CT0001... (one file per slice)
    bool image_nifti = false;  // <folder>/image.nii.gz (HU, int16)
    bool labels_nifti = true;  // <folder>/labels.nii.gz
    bool description = true;   // <folder>/phantom.json: seed, pose, phase, tissues, labels
    std::string study_uid;     // generated when empty
    std::string patient_id = "PHANTOM-0001";
};

// Writes the requested files (each atomically; the folder is created). Returns their paths.
Result<std::vector<std::string>> writeCtPhantomStudy(const CtPhantom& phantom,
                                                     const CtPhantomSpec& spec,
                                                     const std::string& folder,
                                                     const PhantomWriteOptions& options = {});

}  // namespace voxseg::io
