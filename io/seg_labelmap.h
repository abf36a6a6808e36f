// DICOM Label Map Segmentation (Supplement 243, DICOM 2024: SOP Class 1.2.840.10008.5.1.4.1.1.66.7,
// SegmentationType LABELMAP): one frame per source slice that holds a label, each pixel the
// SegmentNumber of its segment (= voxseg's label value), 0 = background (PixelPaddingValue 0).
// DCMTK 3.6.7's dcmseg neither creates nor loads LABELMAP, so both directions work on a plain
// DcmDataset (dcmdata).
//
// Writer (io/seg_writer.cpp, which builds both SEG kinds): frames lie on the acquired source images
// (io/acquired_labels.h), each with its own PlanePositionSequence and a
// DerivationImageSequence/SourceImageSequence naming that source image (ReferencedFrameNumber for
// multi-frame sources); orientation and pixel measures shared. Dimension organisation:
// ImagePositionPatient only (a label map has no segment dimension). Slices without any label get no
// frame (as highdicom's default and voxseg's BINARY writer). MONOCHROME2, colours as
// RecommendedDisplayCIELabValue per segment; BitsAllocated 8 when every label value present is <=
// 255, else 16. Segments: one per label value present; described values that are absent get none.
// Patient, study and frame of reference come from the source. Written through AtomicFile.
//
// Reader: frames as stored (no placement on a grid), MONOCHROME2 or PALETTE COLOR, 8 or 16 bit,
// with each frame's position and referenced source instance. Patient data is never read out or
// logged. Thread safety: reentrant. Units: mm, LPS.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"
#include "io/acquired_labels.h"
#include "io/dicom_series.h"
#include "io/seg_reader.h"
#include "io/seg_types.h"
#include "io/seg_writer.h"

#include <array>
#include <string>
#include <vector>

class DcmDataset;

namespace voxseg::io {

inline constexpr const char* kLabelMapSegSopClassUid = "1.2.840.10008.5.1.4.1.1.66.7";

// `labels` are the label planes on `source`'s acquired images (labelsOnAcquiredImages()); the
// other arguments mean what they mean for writeDicomSeg(). Labels present but not described get
// a generic "label N" segment and a warning. No label at all is an error (a SEG needs a frame).
Result<SegWriteReport> writeLabelMapSeg(const AcquiredLabels& labels, const SeriesCandidate& source,
                                        const std::vector<SegmentDescription>& segments,
                                        const SegWriteOptions& options, const std::string& path);

// The frames of a Label Map SEG, in file order.
struct SegFrames {
    // Per frame: ImagePositionPatient (mm, LPS). Slide-microscopy label maps (no patient
    // coordinates) give the X/Y/Z offsets in the slide coordinate system instead.
    std::vector<Vec3> positions;
    bool slide_coordinates = false;  // positions/orientation are slide coordinates
    // Per frame: the source image it was derived from ("" when the frame names none), and its
    // frame number in that image (1-based, 0 when not given).
    std::vector<std::string> referenced_sop_instances;
    std::vector<int> referenced_frames;
    Vec3 row_dir{1, 0, 0};  // ImageOrientationPatient (or ImageOrientationSlide), first triplet
    Vec3 col_dir{0, 1, 0};
    std::array<double, 2> spacing{
        1, 1};  // PixelSpacing as stored: {between rows, between columns} (mm)
    double slice_thickness = 0;
    // columns x rows x frames, uint8 (BitsAllocated 8) or uint16 (16): the stored label values.
    // Geometry: spacing and orientation as above, origin = first frame's position, third axis
    // along the normal with slice_thickness (nominal; use `positions`).
    Volume planes;
    // One per SegmentNumber other than the background (PixelPaddingValue, else 0);
    // value = SegmentNumber. Colour from RecommendedDisplayCIELabValue, else the palette.
    std::vector<SegmentDescription> segments;
    std::string referenced_series_uid;
    std::string frame_of_reference_uid;
    bool palette_color = false;  // PhotometricInterpretation PALETTE COLOR
};

// `dataset` must be a Label Map SEG (SOP class above or SegmentationType LABELMAP); `path` only
// names it in messages. Compressed pixel data is decoded when DCMTK has the codec registered.
Result<SegFrames> readLabelMapSegFrames(DcmDataset& dataset, const std::string& path);
Result<SegFrames> readLabelMapSegFrames(const std::string& path);

// For readDicomSeg(): label_map = SegFrames::planes (frames stacked as loaded, not placed on a
// grid), segments, frames and the referenced series / frame of reference filled in.
Result<SegReadResult> readLabelMapSeg(const std::string& path, DcmDataset& dataset);

}  // namespace voxseg::io
