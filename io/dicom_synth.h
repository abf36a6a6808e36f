// Writing synthetic DICOM series with DCMTK: a folder of single-frame CT/MR files with exactly
// the geometry, pixel type, rescale and values asked for. Used by the tests (shuffled names,
// removed slices, mixed series, tilt, signed/unsigned, slope/intercept) and by the CLI demo to
// produce a sample series. Files are written through AtomicFile. Thread safety: reentrant.
// Units: mm, LPS; values are STORED values (before RescaleSlope/Intercept).
#pragma once

#include "core/geometry.h"
#include "core/status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace voxseg::io {

struct SynthSeriesSpec {
    std::string series_uid;  // generated when empty
    std::string study_uid;   // generated when empty
    std::string frame_of_reference_uid;
    std::string modality = "CT";
    std::string description = "voxseg synthetic";
    std::string image_type = "ORIGINAL\\PRIMARY\\AXIAL";
    int series_number = 1;
    int columns = 16;
    int rows = 12;
    int slices = 8;
    Vec3 row_dir{1, 0, 0};        // IOP first triplet (direction of increasing column index)
    Vec3 col_dir{0, 1, 0};        // IOP second triplet
    Vec3 origin{0, 0, 0};         // IPP of slice 0
    double column_spacing = 0.8;  // PixelSpacing[1]
    double row_spacing = 0.7;     // PixelSpacing[0]
    double slice_spacing = 2.0;   // along the normal (row_dir x col_dir)
    // Explicit slice offsets along the normal (mm); overrides slice_spacing when not empty.
    std::vector<double> slice_offsets;
    // In-plane drift per slice (mm, LPS), as a tilted gantry gives: IPP_k += k * tilt_shift.
    Vec3 tilt_shift{0, 0, 0};
    // Explicit IPP per slice (mm, LPS); overrides origin, offsets and tilt_shift when not empty.
    std::vector<Vec3> slice_positions;
    bool is_signed = true;  // PixelRepresentation
    int bits_stored = 16;   // BitsAllocated is 16
    double slope = 1.0;
    double intercept = 0.0;
    double echo_time = 0;  // ms; written when > 0
    int first_instance_number = 1;
    // Stored value of voxel (i = column, j = row, k = slice); default: a ramp.
    std::function<int32_t(int i, int j, int k)> value;
    // File names: "<prefix><k>" (no extension) or, when shuffled, random hex names.
    std::string name_prefix = "IM";
    bool shuffle_names = false;
    uint32_t seed = 1;
    bool write_meta_header = true;  // false: bare dataset (tests recognition by content)
    std::string patient_name = "ANONYMOUS^TEST";
    std::string patient_id = "SYNTH-0001";
    // Also write what the CT Image IOD requires beyond the geometry (patient/study/equipment
    // Type 2 attributes, KVP, acquisition number, window, ...), so that dciodvfy accepts it.
    bool ct_image_iod = false;
};

// A fresh DICOM UID under DCMTK's root ("1.2.276.0.7230010.3....").
std::string makeDicomUid();

// Writes spec.slices files into `folder` (created if needed); returns their paths in slice order.
Result<std::vector<std::string>> writeSynthSeries(const SynthSeriesSpec& spec,
                                                  const std::string& folder);

}  // namespace voxseg::io
