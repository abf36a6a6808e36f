#include "io/seg_common.h"

#include "core/log.h"
#include "io/dicom_charset.h"
#include "io/dicom_nesting.h"

#include <dcmtk/dcmdata/dcdeftag.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace voxseg::io {

namespace {
constexpr const char* kComponent = "io.seg";
constexpr Uint32 kMaxHeaderValueLength = 4096;
}  // namespace

std::string dsValue(double v) {
    std::string s = fmt::format("{:.10g}", v);
    if (s.size() > 16) s = fmt::format("{:.8g}", v);
    if (s == "-0") s = "0";
    return s;
}

Result<std::map<std::string, SourceHeader>> readSourceHeaders(const std::vector<SliceRef>& slices) {
    std::map<std::string, SourceHeader> files;
    for (const SliceRef& s : slices) {
        if (files.count(s.path)) continue;
        SourceHeader h;
        VOXSEG_RETURN_IF_ERROR(checkDicomNesting(s.path));
        h.file = std::make_unique<DcmFileFormat>();
        const OFCondition cond = h.file->loadFile(s.path.c_str(), EXS_Unknown, EGL_noChange,
                                                  kMaxHeaderValueLength, ERM_autoDetect);
        if (cond.bad())
            return ioError(
                std::string("cannot read source DICOM file for the SEG references: ") + cond.text(),
                s.path);
        Sint32 frames = 1;
        if (h.file->getDataset()->findAndGetSint32(DCM_NumberOfFrames, frames).good() && frames > 1)
            h.frames = frames;
        files.emplace(s.path, std::move(h));
    }
    return files;
}

std::string str(DcmItem& item, const DcmTagKey& tag) { return charset::getUtf8(&item, tag); }

DcmItem* appendItem(DcmItem& parent, const DcmTagKey& sequence) {
    DcmItem* item = nullptr;
    parent.findOrCreateSequenceItem(sequence, item, -2);  // -2: a new item at the end
    return item;
}

void putCode(DcmItem& parent, const DcmTagKey& sequence, const CodedConcept& code) {
    DcmItem* item = appendItem(parent, sequence);
    if (item == nullptr) return;
    item->putAndInsertString(DCM_CodeValue, code.code.c_str());
    item->putAndInsertString(DCM_CodingSchemeDesignator, code.scheme.c_str());
    item->putAndInsertString(DCM_CodeMeaning, charset::truncateUtf8(code.meaning, 64).c_str());
}

void copyAttributes(DcmItem& from, DcmItem& to, std::initializer_list<DcmTagKey> tags,
                    std::initializer_list<DcmTagKey> type2) {
    for (const DcmTagKey& tag : tags) {
        DcmElement* element = nullptr;
        if (from.findAndGetElement(tag, element).good() && element != nullptr)
            to.insert(OFstatic_cast(DcmElement*, element->clone()), OFTrue);
    }
    for (const DcmTagKey& tag : type2)
        if (!to.tagExists(tag)) to.insertEmptyElement(tag);
}

SegmentDescription segmentFor(int value, const std::vector<SegmentDescription>& described) {
    SegmentDescription desc;
    bool found = false;
    for (const SegmentDescription& d : described)
        if (d.value == value) desc = d, found = true;
    if (!found) {
        desc = SegmentDescription{undescribedLabel(value)};
        log::warning(kComponent,
                     "label {} has no description in the model; written as generic "
                     "tissue",
                     value);
    }
    if (desc.name.empty()) desc.name = desc.type.meaning;
    return desc;
}

std::vector<int> absentLabels(const std::vector<SegmentDescription>& described,
                              const std::vector<int>& present) {
    std::vector<int> absent;
    for (const SegmentDescription& d : described)
        if (std::find(present.begin(), present.end(), d.value) == present.end())
            absent.push_back(d.value);
    if (!absent.empty())
        log::info(kComponent, "label(s) {} have no voxel: no segment written for them",
                  fmt::join(absent, ", "));
    return absent;
}

Status checkSegPlanes(const Vec3& row, const Vec3& col, double column_spacing, double row_spacing,
                      const std::string& path) {
    const auto finite = [](const Vec3& v) {
        return std::isfinite(v[0]) && std::isfinite(v[1]) && std::isfinite(v[2]);
    };
    const double tol = 1e-2;
    if (!finite(row) || !finite(col) || std::abs(norm(row) - 1) > tol ||
        std::abs(norm(col) - 1) > tol || std::abs(dot(row, col)) > tol)
        return corruptData("the SEG's ImageOrientationPatient is not two orthogonal unit vectors",
                           path);
    if (!std::isfinite(column_spacing) || !std::isfinite(row_spacing) || column_spacing <= 0 ||
        row_spacing <= 0)
        return corruptData("the SEG's PixelSpacing is not two positive numbers", path);
    return Status::ok();
}

}  // namespace voxseg::io
