// Plain dcmdata items rather than dcmrt's DRTStructureSetIOD: dcmrt wants one setter call (and
// one error check) per attribute per nesting level, has no way to take over the patient/study
// modules from a source image, and its generated classes would be three times this file for the
// same dataset; dciodvfy checks the result against the IOD in the tests instead.
#include "io/rtstruct_writer.h"

#include "core/atomic_file.h"
#include "core/log.h"
#include "io/contours.h"
#include "io/dicom_charset.h"
#include "io/dicom_nesting.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcvrda.h>
#include <dcmtk/dcmdata/dcvrtm.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>
#include <set>

namespace voxseg::io {

namespace {

constexpr const char* kComponent = "io.rtstruct";
constexpr const char* kUidRoot = SITE_INSTANCE_UID_ROOT;
// Retired but what RTSTRUCT writers (and readers) use for RTReferencedStudySequence.
constexpr const char* kDetachedStudyManagementSopClass = "1.2.840.10008.3.1.2.3.1";
constexpr Uint32 kMaxHeaderValueLength = 4096;  // longer values (pixel data) stay on disk
// Reading stops after the pixel data: stopping AT it makes DCMTK warn for every file.
const DcmTagKey kStopAfterPixelData(0x7FE0, 0x0011);
constexpr size_t kMaxExplicitLength = 0xFFFE;  // 16-bit length field of DS in Explicit VR

// Patient, general study and patient study attributes taken over from the source image; type 2
// ones are written empty when the source lacks them.
struct CopiedTag {
    DcmTagKey tag;
    bool type2;
};
const CopiedTag kCopiedTags[] = {
    {DCM_SpecificCharacterSet, false},
    {DCM_PatientName, true},
    {DCM_PatientID, true},
    {DCM_IssuerOfPatientID, false},
    {DCM_PatientBirthDate, true},
    {DCM_PatientSex, true},
    {DCM_OtherPatientIDsSequence, false},
    {DCM_PatientAge, false},
    {DCM_PatientSize, false},
    {DCM_PatientWeight, false},
    {DCM_StudyInstanceUID, false},
    {DCM_StudyDate, true},
    {DCM_StudyTime, true},
    {DCM_ReferringPhysicianName, true},
    {DCM_StudyID, true},
    {DCM_AccessionNumber, true},
    {DCM_StudyDescription, false},
    {DCM_PositionReferenceIndicator, true},
};

// Decimal string of a coordinate: 4 decimals (0.1 micrometre), trailing zeros dropped. Written
// from the rounded integer (snprintf's "%.4f" took a sixth of the writer's time on a 512 CT).
void appendNumber(std::string& out, double v) {
    long long q = std::llround(v * 10000.0);
    if (q == 0) {
        out.push_back('0');
        return;
    }
    if (q < 0) {
        out.push_back('-');
        q = -q;
    }
    char buf[24];
    const auto end = std::to_chars(buf, buf + sizeof(buf), q / 10000).ptr;
    out.append(buf, end);
    long long fraction = q % 10000;
    if (fraction == 0) return;
    char digits[4];
    for (int i = 3; i >= 0; --i, fraction /= 10) digits[i] = static_cast<char>('0' + fraction % 10);
    int n = 4;
    while (digits[n - 1] == '0') --n;
    out.push_back('.');
    out.append(digits, static_cast<size_t>(n));
}

Status dcm(const OFCondition& cond, const std::string& what, const std::string& path) {
    if (cond.good()) return Status::ok();
    return Status(StatusCode::kInternal, "RTSTRUCT: " + what + ": " + cond.text(), path);
}

Status put(DcmItem* item, const DcmTagKey& tag, const std::string& value, const std::string& path) {
    return dcm(item->putAndInsertString(DcmTag(tag), value.c_str()),
               std::string("setting ") + DcmTag(tag).getTagName(), path);
}

DcmItem* appendItem(DcmItem* parent, const DcmTagKey& sequence) {
    DcmItem* item = nullptr;
    if (parent->findOrCreateSequenceItem(DcmTag(sequence), item, -2).bad()) return nullptr;
    return item;
}

std::string uid() {
    char buf[100];
    dcmGenerateUniqueIdentifier(buf, kUidRoot);
    return buf;
}

// At most n bytes, no UTF-8 character cut in two.
std::string limit(const std::string& s, size_t n) { return charset::truncateUtf8(s, n); }

// Which label values occur anywhere in the volume.
template <typename T>
std::set<int> presentLabels(const T* data, int64_t n) {
    std::vector<uint8_t> seen(size_t{1} << (8 * sizeof(T)), 0);
    for (int64_t i = 0; i < n; ++i) seen[data[i]] = 1;
    std::set<int> out;
    for (size_t v = 1; v < seen.size(); ++v)
        if (seen[v]) out.insert(static_cast<int>(v));
    return out;
}

// What an RTSTRUCT needs before anything is written: a uint8/uint16 label map on the source
// series' planes, and the source series with patient geometry and a frame of reference.
Status checkRtStructInputs(const AcquiredLabels& acquired, const SeriesCandidate& source,
                           const std::string& path) {
    const AcquiredPlanes& planes = acquired.planes;
    if (acquired.labels.empty()) return invalidArgument("RTSTRUCT: empty label map", path);
    if (acquired.labels.pixelType() != PixelType::kUInt8 &&
        acquired.labels.pixelType() != PixelType::kUInt16)
        return invalidArgument("RTSTRUCT: the label map must be uint8 or uint16", path);
    const Geometry g = acquired.labels.geometry();
    if (g.size[0] != planes.columns || g.size[1] != planes.rows ||
        g.size[2] != static_cast<int64_t>(planes.planeCount()) || planes.planeCount() == 0)
        return invalidArgument(
            fmt::format("RTSTRUCT: label map is {}x{}x{} but the source images are {}x{}x{}",
                        g.size[0], g.size[1], g.size[2], planes.columns, planes.rows,
                        planes.planeCount()),
            path);
    if (source.slices.empty() || !source.has_patient_geometry)
        return Status(StatusCode::kFailedPrecondition,
                      "RTSTRUCT needs the source DICOM series (with patient geometry) the labels "
                      "were computed on: write NIfTI/NRRD instead",
                      path);
    if (source.frame_of_reference_uid.empty())
        return Status(StatusCode::kFailedPrecondition,
                      "series " + source.series_uid +
                          " has no FrameOfReferenceUID: RTSTRUCT contours could not be tied to "
                          "its images",
                      path);
    return Status::ok();
}

// Patient, study and equipment copied from the source header `src`; the SOP Common, RT Series
// and Structure Set modules.
Status putRtStructHeader(DcmDataset* ds, DcmDataset* src, const SeriesCandidate& source,
                         const RtStructWriteOptions& options, const std::string& path) {
    for (const CopiedTag& c : kCopiedTags) {
        if (src->findAndInsertCopyOfElement(c.tag, ds).bad() && c.type2)
            VOXSEG_RETURN_IF_ERROR(put(ds, c.tag, "", path));
    }
    if (!ds->tagExists(DCM_StudyInstanceUID))
        VOXSEG_RETURN_IF_ERROR(put(ds, DCM_StudyInstanceUID, source.study_uid, path));

    OFString date, time;
    DcmDate::getCurrentDate(date);
    DcmTime::getCurrentTime(time);
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_SOPClassUID, UID_RTStructureSetStorage, path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_SOPInstanceUID, uid(), path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_InstanceCreationDate, date.c_str(), path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_InstanceCreationTime, time.c_str(), path));
    // RT Series, General Equipment.
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_Modality, "RTSTRUCT", path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_SeriesInstanceUID, uid(), path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_SeriesNumber, std::to_string(options.series_number), path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_SeriesDate, date.c_str(), path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_SeriesTime, time.c_str(), path));
    VOXSEG_RETURN_IF_ERROR(
        put(ds, DCM_SeriesDescription, limit(options.series_description, 64), path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_OperatorsName, "", path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_Manufacturer, "voxseg", path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_ManufacturerModelName, "voxseg", path));
    VOXSEG_RETURN_IF_ERROR(
        put(ds, DCM_SoftwareVersions, limit(options.software_version, 64), path));
    // Structure Set.
    VOXSEG_RETURN_IF_ERROR(
        put(ds, DCM_StructureSetLabel, limit(options.structure_set_label, 16), path));
    if (!options.structure_set_name.empty())
        VOXSEG_RETURN_IF_ERROR(
            put(ds, DCM_StructureSetName, limit(options.structure_set_name, 64), path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_InstanceNumber, "1", path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_StructureSetDate, date.c_str(), path));
    VOXSEG_RETURN_IF_ERROR(put(ds, DCM_StructureSetTime, time.c_str(), path));
    return put(ds, DCM_FrameOfReferenceUID, source.frame_of_reference_uid, path);
}

// The frame of reference, its study and series, and every source image once.
Status putReferencedFrame(DcmDataset* ds, const SeriesCandidate& source,
                          const std::vector<SourceImageRef>& refs, const std::string& path) {
    OFString study_uid;
    ds->findAndGetOFString(DCM_StudyInstanceUID, study_uid);
    DcmItem* frame = appendItem(ds, DCM_ReferencedFrameOfReferenceSequence);
    if (!frame) return internalError("RTSTRUCT: cannot create a sequence item", path);
    VOXSEG_RETURN_IF_ERROR(
        put(frame, DCM_FrameOfReferenceUID, source.frame_of_reference_uid, path));
    DcmItem* study = appendItem(frame, DCM_RTReferencedStudySequence);
    if (!study) return internalError("RTSTRUCT: cannot create a sequence item", path);
    VOXSEG_RETURN_IF_ERROR(
        put(study, DCM_ReferencedSOPClassUID, kDetachedStudyManagementSopClass, path));
    VOXSEG_RETURN_IF_ERROR(put(study, DCM_ReferencedSOPInstanceUID, study_uid.c_str(), path));
    DcmItem* series = appendItem(study, DCM_RTReferencedSeriesSequence);
    if (!series) return internalError("RTSTRUCT: cannot create a sequence item", path);
    VOXSEG_RETURN_IF_ERROR(put(series, DCM_SeriesInstanceUID, source.series_uid, path));
    std::set<std::string> listed;
    for (const SourceImageRef& r : refs) {
        if (!listed.insert(r.sop_instance_uid).second) continue;  // one per file
        DcmItem* image = appendItem(series, DCM_ContourImageSequence);
        if (!image) return internalError("RTSTRUCT: cannot create a sequence item", path);
        VOXSEG_RETURN_IF_ERROR(put(image, DCM_ReferencedSOPClassUID, r.sop_class_uid, path));
        VOXSEG_RETURN_IF_ERROR(put(image, DCM_ReferencedSOPInstanceUID, r.sop_instance_uid, path));
    }
    return Status::ok();
}

// The ROIs, each with its contours, one label value at a time, and what they hold.
struct RoiWriter {
    DcmDataset* ds;
    const AcquiredPlanes& planes;
    const std::vector<SourceImageRef>& refs;
    const std::vector<std::vector<LabelContours>>& contours;  // per plane
    const std::string& for_uid;
    const RtStructWriteOptions& options;
    const std::string& path;
    RtStructWriteReport& report;
    size_t longest = 0;  // the longest ContourData string (Explicit VR holds 0xFFFE)
    std::string data;

    // One contour of plane k into `roi_contour`'s ContourSequence.
    Status putContour(DcmItem* roi_contour, size_t k, const PlanarContour& c, int number) {
        const SourceImageRef& ref = refs[k];
        DcmItem* item = appendItem(roi_contour, DCM_ContourSequence);
        if (!item) return internalError("RTSTRUCT: cannot create a sequence item", path);
        DcmItem* image = appendItem(item, DCM_ContourImageSequence);
        if (!image) return internalError("RTSTRUCT: cannot create a sequence item", path);
        VOXSEG_RETURN_IF_ERROR(put(image, DCM_ReferencedSOPClassUID, ref.sop_class_uid, path));
        VOXSEG_RETURN_IF_ERROR(
            put(image, DCM_ReferencedSOPInstanceUID, ref.sop_instance_uid, path));
        if (ref.multi_frame)
            VOXSEG_RETURN_IF_ERROR(
                put(image, DCM_ReferencedFrameNumber, std::to_string(ref.frame + 1), path));
        VOXSEG_RETURN_IF_ERROR(put(item, DCM_ContourGeometricType, "CLOSED_PLANAR", path));
        VOXSEG_RETURN_IF_ERROR(
            put(item, DCM_NumberOfContourPoints, std::to_string(c.points.size()), path));
        VOXSEG_RETURN_IF_ERROR(put(item, DCM_ContourNumber, std::to_string(number), path));
        data.clear();
        for (const ContourPoint& p : c.points) {
            const Vec3 x = planes.pixelToPhysical(k, p.x, p.y);
            for (int a = 0; a < 3; ++a) {
                if (!data.empty()) data.push_back('\\');
                appendNumber(data, x[static_cast<size_t>(a)]);
            }
        }
        longest = std::max(longest, data.size());
        VOXSEG_RETURN_IF_ERROR(put(item, DCM_ContourData, data, path));
        ++report.contours;
        report.points += static_cast<int64_t>(c.points.size());
        return Status::ok();
    }

    // Label value `value` as ROI number `value`: its Structure Set ROI, ROI Contour and RT ROI
    // Observations items.
    Status putRoi(int value, const SegmentDescription& d) {
        const std::string number = std::to_string(value);
        DcmItem* roi = appendItem(ds, DCM_StructureSetROISequence);
        DcmItem* roi_contour = appendItem(ds, DCM_ROIContourSequence);
        DcmItem* observation = appendItem(ds, DCM_RTROIObservationsSequence);
        if (!roi || !roi_contour || !observation)
            return internalError("RTSTRUCT: cannot create a sequence item", path);
        VOXSEG_RETURN_IF_ERROR(put(roi, DCM_ROINumber, number, path));
        VOXSEG_RETURN_IF_ERROR(put(roi, DCM_ReferencedFrameOfReferenceUID, for_uid, path));
        VOXSEG_RETURN_IF_ERROR(put(roi, DCM_ROIName, limit(d.name, 64), path));
        if (!d.description.empty())
            VOXSEG_RETURN_IF_ERROR(put(roi, DCM_ROIDescription, d.description, path));
        VOXSEG_RETURN_IF_ERROR(put(roi, DCM_ROIGenerationAlgorithm, "AUTOMATIC", path));
        VOXSEG_RETURN_IF_ERROR(
            put(roi, DCM_ROIGenerationDescription, limit(options.algorithm_name, 64), path));

        VOXSEG_RETURN_IF_ERROR(put(roi_contour, DCM_ROIDisplayColor,
                                   fmt::format("{}\\{}\\{}", d.color[0], d.color[1], d.color[2]),
                                   path));
        int contour_number = 0;
        for (size_t k = 0; k < contours.size(); ++k)
            for (const LabelContours& lc : contours[k])
                if (lc.label == value)
                    for (const PlanarContour& c : lc.contours)
                        VOXSEG_RETURN_IF_ERROR(putContour(roi_contour, k, c, ++contour_number));
        VOXSEG_RETURN_IF_ERROR(put(roi_contour, DCM_ReferencedROINumber, number, path));

        VOXSEG_RETURN_IF_ERROR(put(observation, DCM_ObservationNumber, number, path));
        VOXSEG_RETURN_IF_ERROR(put(observation, DCM_ReferencedROINumber, number, path));
        if (!d.type.code.empty() && !d.type.scheme.empty() && !d.type.meaning.empty()) {
            DcmItem* code = appendItem(observation, DCM_RTROIIdentificationCodeSequence);
            if (!code) return internalError("RTSTRUCT: cannot create a sequence item", path);
            VOXSEG_RETURN_IF_ERROR(put(code, DCM_CodeValue, d.type.code, path));
            VOXSEG_RETURN_IF_ERROR(put(code, DCM_CodingSchemeDesignator, d.type.scheme, path));
            VOXSEG_RETURN_IF_ERROR(put(code, DCM_CodeMeaning, limit(d.type.meaning, 64), path));
        }
        VOXSEG_RETURN_IF_ERROR(
            put(observation, DCM_RTROIInterpretedType, options.interpreted_type, path));
        VOXSEG_RETURN_IF_ERROR(put(observation, DCM_ROIInterpreter, "", path));
        ++report.rois;
        return Status::ok();
    }
};

}  // namespace

Result<std::vector<SourceImageRef>> readSourceImageRefs(const std::vector<SliceRef>& slices) {
    struct FileInfo {
        std::string sop_class, sop_instance;
        int frames = 1;
    };
    std::map<std::string, FileInfo> files;
    std::vector<SourceImageRef> out;
    out.reserve(slices.size());
    for (const SliceRef& s : slices) {
        auto it = files.find(s.path);
        if (it == files.end()) {
            VOXSEG_RETURN_IF_ERROR(checkDicomNesting(s.path));
            DcmFileFormat file;
            const OFCondition cond =
                file.loadFileUntilTag(s.path.c_str(), EXS_Unknown, EGL_noChange,
                                      kMaxHeaderValueLength, ERM_autoDetect, kStopAfterPixelData);
            if (cond.bad())
                return ioError(std::string("cannot read the source image header: ") + cond.text(),
                               s.path);
            DcmDataset* ds = file.getDataset();
            FileInfo info;
            OFString v;
            if (ds->findAndGetOFString(DCM_SOPClassUID, v).good()) info.sop_class = v.c_str();
            if (ds->findAndGetOFString(DCM_SOPInstanceUID, v).good()) info.sop_instance = v.c_str();
            Sint32 frames = 1;
            if (ds->findAndGetSint32(DCM_NumberOfFrames, frames).good() && frames > 1)
                info.frames = frames;
            if (info.sop_instance.empty())
                return corruptData("source image without SOPInstanceUID", s.path);
            it = files.emplace(s.path, std::move(info)).first;
        }
        out.push_back(
            {it->second.sop_class, it->second.sop_instance, s.frame, it->second.frames > 1});
    }
    return out;
}

Result<RtStructWriteReport> writeRtStruct(const AcquiredLabels& acquired,
                                          const SeriesCandidate& source,
                                          const std::vector<SegmentDescription>& rois,
                                          const RtStructWriteOptions& options,
                                          const std::string& path) {
    VOXSEG_RETURN_IF_ERROR(checkRtStructInputs(acquired, source, path));
    const AcquiredPlanes& planes = acquired.planes;
    AtomicFile out(path);
    VOXSEG_RETURN_IF_ERROR(out.checkWritable());

    try {
        const int64_t n = acquired.labels.geometry().voxelCount();
        const std::set<int> present = acquired.labels.pixelType() == PixelType::kUInt8
                                          ? presentLabels(acquired.labels.data<uint8_t>(), n)
                                          : presentLabels(acquired.labels.data<uint16_t>(), n);
        RtStructWriteReport report;
        std::map<int, SegmentDescription> described;
        for (const SegmentDescription& d : rois) described[d.value] = d;
        for (const auto& [value, d] : described) {
            if (value > 0 && !present.count(value)) {
                report.empty_labels.push_back(value);
                log::warning(kComponent, "label {} ('{}') has no voxels: no ROI written", value,
                             d.name);
            }
        }
        if (present.empty())
            return Status(StatusCode::kFailedPrecondition,
                          "the label map is empty (no label found): no RTSTRUCT written", path);

        auto refs = readSourceImageRefs(planes.slices);
        if (!refs.isOk()) return refs.status();
        // The study and series, from the first source header.
        DcmFileFormat first_file;
        {
            const std::string& first = planes.slices.front().path;
            VOXSEG_RETURN_IF_ERROR(checkDicomNesting(first));
            const OFCondition cond = first_file.loadFileUntilTag(
                first.c_str(), EXS_Unknown, EGL_noChange, kMaxHeaderValueLength, ERM_autoDetect,
                kStopAfterPixelData);
            if (cond.bad())
                return ioError(std::string("cannot read the source image header: ") + cond.text(),
                               first);
        }
        // What is copied from the source and what voxseg writes are both UTF-8 (ISO_IR 192).
        charset::convertItemToUtf8(*first_file.getDataset());
        const std::vector<std::vector<LabelContours>> contours =
            extractVolumeContours(acquired.labels, options.threads);

        DcmFileFormat file;
        DcmDataset* ds = file.getDataset();
        VOXSEG_RETURN_IF_ERROR(
            putRtStructHeader(ds, first_file.getDataset(), source, options, path));
        VOXSEG_RETURN_IF_ERROR(putReferencedFrame(ds, source, *refs, path));
        RoiWriter writer{ds,      planes, *refs, contours, source.frame_of_reference_uid,
                         options, path,   report};
        for (int value : present) {
            SegmentDescription d;
            if (auto it = described.find(value); it != described.end()) {
                d = it->second;
            } else {
                d = SegmentDescription{undescribedLabel(value)};
                log::warning(kComponent, "label {} has no description: written as ROI 'label {}'",
                             value, value);
            }
            if (d.name.empty()) d.name = d.type.meaning;
            VOXSEG_RETURN_IF_ERROR(writer.putRoi(value, d));
        }
        VOXSEG_RETURN_IF_ERROR(put(ds, DCM_ApprovalStatus, "UNAPPROVED", path));

        report.implicit_vr = writer.longest > kMaxExplicitLength;
        const E_TransferSyntax xfer =
            report.implicit_vr ? EXS_LittleEndianImplicit : EXS_LittleEndianExplicit;
        if (report.implicit_vr)
            log::info(kComponent,
                      "a contour holds {} characters, more than Explicit VR allows: written as "
                      "Implicit VR Little Endian",
                      writer.longest);
        const OFCondition saved = file.saveFile(out.tempPath().c_str(), xfer);
        if (saved.bad())
            return ioError(std::string("writing the RTSTRUCT failed: ") + saved.text(), path);
        VOXSEG_RETURN_IF_ERROR(out.commit());
        log::info(kComponent, "wrote RTSTRUCT: {} ROI(s), {} contour(s), {} point(s)", report.rois,
                  report.contours, report.points);
        return report;
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory while writing the RTSTRUCT", path);
    }
}

}  // namespace voxseg::io
