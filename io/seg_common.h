// What the DICOM segmentation writers (BINARY SEG, Label Map SEG) share: DS value formatting,
// the headers of the source images, and the segment a label value is written as. Internal to
// io/. Reentrant.
#pragma once

#include "core/status.h"
#include "io/dicom_series.h"
#include "io/seg_types.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcitem.h>

#include <initializer_list>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace voxseg::io {

// A DS value (at most 16 characters; never "-0").
std::string dsValue(double v);

struct SourceHeader {
    std::unique_ptr<DcmFileFormat> file;  // header only: values over 4 KiB (pixels) not read
    int frames = 1;                       // NumberOfFrames
};

// One header per file of `slices`, keyed by path; an unreadable file is an error naming it.
Result<std::map<std::string, SourceHeader>> readSourceHeaders(const std::vector<SliceRef>& slices);

// The segment label `value` is written as: its description, or a generic "label N" (category
// and type Tissue) with a warning; an empty SegmentLabel becomes the type's meaning.
SegmentDescription segmentFor(int value, const std::vector<SegmentDescription>& described);

// Small dataset helpers of the SEG writers and the Label Map SEG reader.
std::string str(DcmItem& item, const DcmTagKey& tag);             // the whole value, "" when absent
DcmItem* appendItem(DcmItem& parent, const DcmTagKey& sequence);  // a new last item
void putCode(DcmItem& parent, const DcmTagKey& sequence, const CodedConcept& code);
// Copies `tags` present in `from` into `to`; Type 2 ones absent there are written empty.
void copyAttributes(DcmItem& from, DcmItem& to, std::initializer_list<DcmTagKey> tags,
                    std::initializer_list<DcmTagKey> type2);

// Described label values that `present` lacks (written as no segment; logged once).
std::vector<int> absentLabels(const std::vector<SegmentDescription>& described,
                              const std::vector<int>& present);

// A SEG's ImageOrientationPatient and PixelSpacing as the readers need them before any volume
// is made: two orthogonal unit vectors (within 1e-2: files round their cosines) and finite,
// positive spacings. ITK throws from SetDirection on a singular direction, which terminated
// the readers (found by fuzz_seg_reader).
Status checkSegPlanes(const Vec3& row, const Vec3& col, double column_spacing, double row_spacing,
                      const std::string& path);

}  // namespace voxseg::io
