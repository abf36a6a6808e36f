// The SEG writer builds the dataset itself (dcmdata), for both SEG kinds. DCMTK 3.6.7's dcmseg
// cannot write the Label Map IOD, packs BINARY frames bit by bit from a byte per pixel (a quarter
// of this writer's time on a 512x512x300 CT), takes no pre-packed frame, and offers no
// SpatialLocationsPreserved; one hand-built writer for both kinds keeps the modules identical.
// dcmseg still reads BINARY/FRACTIONAL SEGs (io/seg_reader.cpp); dciodvfy, highdicom and the
// dcmqi reference files check what is written (tests/io/seg_*test.cpp).
#include "io/seg_writer.h"

#include "core/atomic_file.h"
#include "core/log.h"
#include "io/dicom_charset.h"
#include "io/seg_common.h"
#include "io/seg_labelmap.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcvrda.h>
#include <dcmtk/dcmdata/dcvrtm.h>
#include <dcmtk/dcmiod/cielabutil.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace voxseg::io {

namespace {

constexpr const char* kComponent = "io.seg";
// Root for UIDs voxseg generates (DCMTK's site root is used when none is configured).
constexpr const char* kUidRoot = SITE_INSTANCE_UID_ROOT;

Status checked(const OFCondition& cond, const std::string& what, const std::string& path) {
    if (cond.good()) return Status::ok();
    return internalError("DICOM SEG: " + what + ": " + cond.text(), path);
}

// Label values present and, per value, on which planes (pixel counts).
struct Presence {
    std::vector<int> values;                      // ascending
    std::vector<std::vector<int64_t>> per_plane;  // per value: pixels on each plane
    std::vector<bool> plane_has_label;
};

template <typename T>
Presence presenceOf(const T* data, int64_t plane, size_t planes) {
    // A histogram per plane, as wide as the largest value present (a std::map lookup per
    // foreground voxel took half of the writer's own time on a 512x512x300 CT).
    T top = 0;
    const int64_t n = plane * static_cast<int64_t>(planes);
    for (int64_t i = 0; i < n; ++i) top = std::max(top, data[i]);
    std::vector<std::vector<int64_t>> counts(static_cast<size_t>(top) + 1);
    std::vector<int64_t> hist(static_cast<size_t>(top) + 1);
    Presence p;
    p.plane_has_label.assign(planes, false);
    for (size_t k = 0; k < planes; ++k) {
        std::fill(hist.begin(), hist.end(), 0);
        const T* slice = data + static_cast<int64_t>(k) * plane;
        for (int64_t i = 0; i < plane; ++i)
            if (slice[i] != T(0)) ++hist[slice[i]];  // background (most voxels) not counted
        for (size_t v = 1; v < hist.size(); ++v) {
            if (hist[v] == 0) continue;
            if (counts[v].empty()) counts[v].assign(planes, 0);
            counts[v][k] = hist[v];
            p.plane_has_label[k] = true;
        }
    }
    for (size_t v = 1; v < counts.size(); ++v)
        if (!counts[v].empty()) {
            p.values.push_back(static_cast<int>(v));
            p.per_plane.push_back(std::move(counts[v]));
        }
    return p;
}

// SOP common, patient, study, frame of reference, series, equipment, general and segmentation
// image: everything but the pixel description, segments, dimensions and frames.
void putCommonModules(DcmDataset& ds, DcmDataset& first, const SeriesCandidate& source,
                      const SegWriteOptions& options, const char* sop_class) {
    char uid[100];
    ds.putAndInsertString(DCM_SOPClassUID, sop_class);
    ds.putAndInsertString(DCM_SOPInstanceUID, dcmGenerateUniqueIdentifier(uid, kUidRoot));
    copyAttributes(first, ds, {DCM_SpecificCharacterSet}, {});
    copyAttributes(
        first, ds,
        {DCM_PatientName, DCM_PatientID, DCM_IssuerOfPatientID,
         DCM_IssuerOfPatientIDQualifiersSequence, DCM_PatientBirthDate, DCM_PatientSex,
         DCM_OtherPatientIDsSequence, DCM_PatientAge, DCM_PatientSize, DCM_PatientWeight},
        {DCM_PatientName, DCM_PatientID, DCM_PatientBirthDate, DCM_PatientSex});
    copyAttributes(first, ds,
                   {DCM_StudyInstanceUID, DCM_StudyDate, DCM_StudyTime, DCM_ReferringPhysicianName,
                    DCM_StudyID, DCM_AccessionNumber, DCM_IssuerOfAccessionNumberSequence,
                    DCM_StudyDescription},
                   {DCM_StudyDate, DCM_StudyTime, DCM_ReferringPhysicianName, DCM_StudyID,
                    DCM_AccessionNumber});
    if (str(ds, DCM_StudyInstanceUID).empty())
        ds.putAndInsertString(DCM_StudyInstanceUID, dcmGenerateUniqueIdentifier(uid, kUidRoot));
    copyAttributes(first, ds, {DCM_FrameOfReferenceUID, DCM_PositionReferenceIndicator},
                   {DCM_PositionReferenceIndicator});
    if (str(ds, DCM_FrameOfReferenceUID).empty()) {
        ds.putAndInsertString(DCM_FrameOfReferenceUID, dcmGenerateUniqueIdentifier(uid, kUidRoot));
        log::warning(kComponent,
                     "series {}: no FrameOfReferenceUID in the source; a new one was generated "
                     "for the SEG",
                     source.series_uid);
    }
    OFString date, time;
    DcmDate::getCurrentDate(date);
    DcmTime::getCurrentTime(time);
    ds.putAndInsertString(DCM_Modality, "SEG");
    ds.putAndInsertString(DCM_SeriesInstanceUID, dcmGenerateUniqueIdentifier(uid, kUidRoot));
    ds.putAndInsertString(DCM_SeriesNumber, std::to_string(options.series_number).c_str());
    ds.putAndInsertString(DCM_SeriesDescription,
                          charset::truncateUtf8(options.series_description, 64).c_str());
    ds.putAndInsertString(DCM_SeriesDate, date.c_str());
    ds.putAndInsertString(DCM_SeriesTime, time.c_str());
    ds.putAndInsertString(DCM_Manufacturer, "voxseg");
    ds.putAndInsertString(DCM_ManufacturerModelName, "voxseg");
    ds.putAndInsertString(DCM_DeviceSerialNumber, "1");
    ds.putAndInsertString(DCM_SoftwareVersions, options.software_version.c_str());
    ds.putAndInsertString(DCM_InstanceNumber, "1");
    ds.putAndInsertString(DCM_ContentDate, date.c_str());
    ds.putAndInsertString(DCM_ContentTime, time.c_str());
    ds.putAndInsertString(DCM_InstanceCreationDate, date.c_str());
    ds.putAndInsertString(DCM_InstanceCreationTime, time.c_str());
    ds.putAndInsertString(DCM_ImageType, "DERIVED\\PRIMARY");
    ds.putAndInsertString(DCM_ContentLabel, options.content_label.c_str());
    ds.putAndInsertString(DCM_ContentDescription,
                          charset::truncateUtf8(options.content_description, 64).c_str());
    ds.insertEmptyElement(DCM_ContentCreatorName);
    ds.putAndInsertString(DCM_SegmentsOverlap, "NO");
    ds.putAndInsertUint16(DCM_SamplesPerPixel, 1);
    ds.putAndInsertString(DCM_PhotometricInterpretation, "MONOCHROME2");
    ds.putAndInsertUint16(DCM_PixelRepresentation, 0);
    ds.putAndInsertString(DCM_LossyImageCompression, "00");
}

// One SegmentSequence item: `number` is the SegmentNumber.
void putSegment(DcmDataset& ds, Uint16 number, const SegmentDescription& desc,
                const SegWriteOptions& options) {
    DcmItem* item = appendItem(ds, DCM_SegmentSequence);
    item->putAndInsertUint16(DCM_SegmentNumber, number);
    item->putAndInsertString(DCM_SegmentLabel, charset::truncateUtf8(desc.name, 64).c_str());
    if (!desc.description.empty())
        item->putAndInsertString(DCM_SegmentDescription,
                                 charset::truncateUtf8(desc.description, 64).c_str());
    putCode(*item, DCM_SegmentedPropertyCategoryCodeSequence, desc.category);
    putCode(*item, DCM_SegmentedPropertyTypeCodeSequence, desc.type);
    DcmItem* type_item = nullptr;
    if (desc.type_modifier &&
        item->findAndGetSequenceItem(DCM_SegmentedPropertyTypeCodeSequence, type_item, 0).good() &&
        type_item != nullptr)
        putCode(*type_item, DCM_SegmentedPropertyTypeModifierCodeSequence, *desc.type_modifier);
    const std::string type = desc.algorithm_type.empty() ? "AUTOMATIC" : desc.algorithm_type;
    item->putAndInsertString(DCM_SegmentAlgorithmType, type.c_str());
    if (type != "MANUAL") {  // the algorithm attributes are Type 1C: absent for MANUAL
        item->putAndInsertString(DCM_SegmentAlgorithmName,
                                 charset::truncateUtf8(options.algorithm_name, 64).c_str());
        DcmItem* algo = appendItem(*item, DCM_SegmentationAlgorithmIdentificationSequence);
        putCode(*algo, DCM_AlgorithmFamilyCodeSequence,
                {"123110", "DCM", "Artificial Intelligence"});
        algo->putAndInsertString(DCM_AlgorithmName,
                                 charset::truncateUtf8(options.algorithm_name, 64).c_str());
        algo->putAndInsertString(DCM_AlgorithmVersion,
                                 charset::truncateUtf8(options.algorithm_version, 64).c_str());
    }
    double lab[3];
    IODCIELabUtil::rgb2DicomLab(lab[0], lab[1], lab[2], desc.color[0] / 255.0,
                                desc.color[1] / 255.0, desc.color[2] / 255.0);
    const Uint16 lab16[3] = {static_cast<Uint16>(std::lround(lab[0])),
                             static_cast<Uint16>(std::lround(lab[1])),
                             static_cast<Uint16>(std::lround(lab[2]))};
    item->putAndInsertUint16Array(DCM_RecommendedDisplayCIELabValue, lab16, 3);
}

// Dimension organisation: (segment number, plane position) for BINARY, the position alone for
// LABELMAP.
void putDimensions(DcmDataset& ds, bool with_segment) {
    char uid[100];
    const std::string dim_uid = dcmGenerateUniqueIdentifier(uid, kUidRoot);
    appendItem(ds, DCM_DimensionOrganizationSequence)
        ->putAndInsertString(DCM_DimensionOrganizationUID, dim_uid.c_str());
    auto add = [&](const DcmTagKey& pointer, const DcmTagKey& group, const char* label) {
        DcmItem* dim = appendItem(ds, DCM_DimensionIndexSequence);
        dim->putAndInsertString(DCM_DimensionOrganizationUID, dim_uid.c_str());
        dim->putAndInsertTagKey(DCM_DimensionIndexPointer, pointer);
        dim->putAndInsertTagKey(DCM_FunctionalGroupPointer, group);
        dim->putAndInsertString(DCM_DimensionDescriptionLabel, label);
    };
    if (with_segment)
        add(DCM_ReferencedSegmentNumber, DCM_SegmentIdentificationSequence,
            "ReferencedSegmentNumber");
    add(DCM_ImagePositionPatient, DCM_PlanePositionSequence, "ImagePositionPatient");
}

// Shared functional groups (the images' orientation and pixel measures) and the references to
// every source instance.
void putSharedGroupsAndReferences(DcmDataset& ds, DcmDataset& first, const AcquiredLabels& labels,
                                  std::map<std::string, SourceHeader>& files) {
    const AcquiredPlanes& planes = labels.planes;
    DcmItem* shared = appendItem(ds, DCM_SharedFunctionalGroupsSequence);
    const Vec3& r = planes.row_dir;
    const Vec3& c = planes.col_dir;
    const std::string iop = dsValue(r[0]) + "\\" + dsValue(r[1]) + "\\" + dsValue(r[2]) + "\\" +
                            dsValue(c[0]) + "\\" + dsValue(c[1]) + "\\" + dsValue(c[2]);
    appendItem(*shared, DCM_PlaneOrientationSequence)
        ->putAndInsertString(DCM_ImageOrientationPatient, iop.c_str());
    DcmItem* measures = appendItem(*shared, DCM_PixelMeasuresSequence);
    measures->putAndInsertString(
        DCM_PixelSpacing,
        (dsValue(planes.row_spacing) + "\\" + dsValue(planes.column_spacing)).c_str());
    double thickness = planes.slice_thickness;
    if (!(thickness > 0)) first.findAndGetFloat64(DCM_SliceThickness, thickness);
    if (thickness > 0)
        measures->putAndInsertString(DCM_SliceThickness, dsValue(thickness).c_str());
    else
        measures->insertEmptyElement(DCM_SliceThickness);
    // Only a regular stack has one spacing between its slices.
    if (!labels.resampled && labels.labels.geometry().size[2] > 1)
        measures->putAndInsertString(DCM_SpacingBetweenSlices,
                                     dsValue(labels.labels.geometry().spacing[2]).c_str());

    DcmItem* series_item = appendItem(ds, DCM_ReferencedSeriesSequence);
    series_item->putAndInsertString(DCM_SeriesInstanceUID,
                                    str(first, DCM_SeriesInstanceUID).c_str());
    std::set<std::string> referenced;
    for (const SliceRef& s : planes.slices) {
        DcmDataset& src = *files.at(s.path).file->getDataset();
        const std::string instance = str(src, DCM_SOPInstanceUID);
        if (instance.empty() || !referenced.insert(instance).second) continue;
        DcmItem* ref = appendItem(*series_item, DCM_ReferencedInstanceSequence);
        ref->putAndInsertString(DCM_ReferencedSOPClassUID, str(src, DCM_SOPClassUID).c_str());
        ref->putAndInsertString(DCM_ReferencedSOPInstanceUID, instance.c_str());
    }
}

// One PerFrameFunctionalGroupsSequence item: the source image (SpatialLocationsPreserved: the
// frame is that image's pixel grid), dimension index values, plane position and, for BINARY, the
// segment.
void putFrameGroups(DcmDataset& ds, const SliceRef& s, const SourceHeader& sf, Uint16 segment,
                    Uint32 plane_index) {
    DcmItem* fg = appendItem(ds, DCM_PerFrameFunctionalGroupsSequence);
    DcmItem* derivation = appendItem(*fg, DCM_DerivationImageSequence);
    putCode(*derivation, DCM_DerivationCodeSequence, {"113076", "DCM", "Segmentation"});
    DcmDataset& src = *sf.file->getDataset();
    DcmItem* image = appendItem(*derivation, DCM_SourceImageSequence);
    image->putAndInsertString(DCM_ReferencedSOPClassUID, str(src, DCM_SOPClassUID).c_str());
    image->putAndInsertString(DCM_ReferencedSOPInstanceUID, str(src, DCM_SOPInstanceUID).c_str());
    if (sf.frames > 1)
        image->putAndInsertString(DCM_ReferencedFrameNumber, std::to_string(s.frame + 1).c_str());
    putCode(*image, DCM_PurposeOfReferenceCodeSequence,
            {"121322", "DCM", "Source image for image processing operation"});
    image->putAndInsertString(DCM_SpatialLocationsPreserved, "YES");
    const Uint32 with_segment[2] = {segment, plane_index};
    appendItem(*fg, DCM_FrameContentSequence)
        ->putAndInsertUint32Array(DCM_DimensionIndexValues,
                                  segment > 0 ? with_segment : &plane_index, segment > 0 ? 2 : 1);
    const std::string ipp =
        dsValue(s.position[0]) + "\\" + dsValue(s.position[1]) + "\\" + dsValue(s.position[2]);
    appendItem(*fg, DCM_PlanePositionSequence)
        ->putAndInsertString(DCM_ImagePositionPatient, ipp.c_str());
    if (segment > 0)
        appendItem(*fg, DCM_SegmentIdentificationSequence)
            ->putAndInsertUint16(DCM_ReferencedSegmentNumber, segment);
}

// BINARY pixel data: frames in segment-major, plane order, one bit per pixel, LSB first, frames
// back to back without padding (as the standard packs 1-bit data). One pass per plane sets the
// bits of every segment present on it.
template <typename T>
std::vector<Uint8> packBinaryFrames(const AcquiredLabels& labels, const Presence& p,
                                    const std::vector<std::vector<int64_t>>& frame_of) {
    const int64_t plane = labels.planeSize();
    int64_t frames = 0;
    for (const auto& f : frame_of)
        for (int64_t i : f) frames += i >= 0;
    std::vector<Uint8> bits(static_cast<size_t>((frames * plane + 7) / 8 + 1) & ~size_t{1});
    std::vector<int64_t> frame_of_value;  // per label value on the current plane
    const int top = p.values.back();
    frame_of_value.assign(static_cast<size_t>(top) + 1, -1);
    for (size_t k = 0; k < labels.planes.planeCount(); ++k) {
        if (!p.plane_has_label[k]) continue;
        for (size_t s = 0; s < p.values.size(); ++s)
            frame_of_value[static_cast<size_t>(p.values[s])] = frame_of[s][k];
        const T* src = labels.plane<T>(k);
        for (int64_t n = 0; n < plane; ++n) {
            const T v = src[n];
            if (v == T(0)) continue;
            const int64_t bit = frame_of_value[v] * plane + n;
            bits[static_cast<size_t>(bit >> 3)] |= static_cast<Uint8>(1u << (bit & 7));
        }
    }
    return bits;
}

// What a SEG needs before anything is written: a uint8/uint16 label map on the source series'
// acquired planes, at most 65535 pixels a side.
Status checkSegInputs(const AcquiredLabels& labels, const SeriesCandidate& source, const char* kind,
                      const std::string& path) {
    const AcquiredPlanes& planes = labels.planes;
    if (labels.labels.empty())
        return invalidArgument(std::string(kind) + ": empty label map", path);
    const PixelType type = labels.labels.pixelType();
    if (type != PixelType::kUInt8 && type != PixelType::kUInt16)
        return invalidArgument(std::string(kind) + ": the label map must be uint8 or uint16", path);
    if (source.slices.empty() || planes.slices.empty())
        return Status(StatusCode::kFailedPrecondition,
                      "DICOM SEG needs the source DICOM series the label map was computed on; "
                      "this input is not DICOM: write NIfTI/NRRD instead (drop 'seg' from "
                      "--outputs)",
                      path);
    const Geometry lg = labels.labels.geometry();
    if (lg.size[0] != planes.columns || lg.size[1] != planes.rows ||
        static_cast<size_t>(lg.size[2]) != planes.planeCount())
        return invalidArgument(
            fmt::format("{}: label planes are {}x{}x{} but the acquired images are {}x{}x{}; "
                        "map them with labelsOnAcquiredImages()",
                        kind, lg.size[0], lg.size[1], lg.size[2], planes.columns, planes.rows,
                        planes.planeCount()),
            path);
    if (planes.columns > 65535 || planes.rows > 65535)
        return unsupported(std::string(kind) + ": images larger than 65535 pixels", path);
    return Status::ok();
}

// Frame index of (segment s, plane k), -1 when the segment is not on the plane: a label map has
// one frame per plane holding any label, BINARY one per segment and plane it is on.
std::vector<std::vector<int64_t>> segFrames(const Presence& p, size_t plane_count, bool label_map,
                                            int64_t& frames) {
    std::vector<std::vector<int64_t>> frame_of(p.values.size());
    frames = 0;
    if (label_map) {
        std::vector<int64_t> index(plane_count, -1);
        for (size_t k = 0; k < plane_count; ++k)
            if (p.plane_has_label[k]) index[k] = frames++;
        frame_of.assign(p.values.size(), index);
    } else {
        for (size_t s = 0; s < p.values.size(); ++s) {
            frame_of[s].assign(plane_count, -1);
            for (size_t k = 0; k < plane_count; ++k)
                if (p.per_plane[s][k] > 0) frame_of[s][k] = frames++;
        }
    }
    return frame_of;
}

// The frames' pixels in frame order: BINARY bit-packed, a label map's values in 8 or 16 bits.
Status putSegPixelData(DcmDataset& ds, const AcquiredLabels& labels, const Presence& p,
                       const std::vector<std::vector<int64_t>>& frame_of, bool label_map, int bits,
                       int64_t frames, const std::string& path) {
    const PixelType type = labels.labels.pixelType();
    const int64_t plane = labels.planeSize();
    const size_t plane_count = labels.planes.planeCount();
    OFCondition put;
    if (!label_map) {
        std::vector<Uint8> packed = type == PixelType::kUInt8
                                        ? packBinaryFrames<uint8_t>(labels, p, frame_of)
                                        : packBinaryFrames<uint16_t>(labels, p, frame_of);
        put = ds.putAndInsertUint8Array(DCM_PixelData, packed.data(),
                                        static_cast<unsigned long>(packed.size()));
    } else if (bits == 8) {
        std::vector<Uint8> pixels;
        pixels.reserve(static_cast<size_t>(plane * frames));
        for (size_t k = 0; k < plane_count; ++k) {
            if (!p.plane_has_label[k]) continue;  // empty frames omitted
            if (type == PixelType::kUInt8) {
                const uint8_t* src = labels.plane<uint8_t>(k);
                pixels.insert(pixels.end(), src, src + plane);
            } else {
                const uint16_t* src = labels.plane<uint16_t>(k);
                for (int64_t i = 0; i < plane; ++i) pixels.push_back(static_cast<Uint8>(src[i]));
            }
        }
        put = ds.putAndInsertUint8Array(DCM_PixelData, pixels.data(),
                                        static_cast<unsigned long>(pixels.size()));
    } else {
        std::vector<Uint16> pixels;
        pixels.reserve(static_cast<size_t>(plane * frames));
        for (size_t k = 0; k < plane_count; ++k) {
            if (!p.plane_has_label[k]) continue;
            const uint16_t* src = labels.plane<uint16_t>(k);
            pixels.insert(pixels.end(), src, src + plane);
        }
        put = ds.putAndInsertUint16Array(DCM_PixelData, pixels.data(),
                                         static_cast<unsigned long>(pixels.size()));
    }
    VOXSEG_RETURN_IF_ERROR(checked(put, "pixel data", path));
    return Status::ok();
}

}  // namespace

Result<SegType> parseSegType(const std::string& name) {
    if (name == "binary") return SegType::kBinary;
    if (name == "labelmap") return SegType::kLabelMap;
    return invalidArgument("unknown SEG type '" + name + "': use binary or labelmap");
}

Result<SegWriteReport> writeDicomSeg(const Volume& label_map, const SeriesCandidate& source,
                                     const std::vector<SegmentDescription>& segments,
                                     const SegWriteOptions& options, const std::string& path) {
    if (label_map.empty()) return invalidArgument("DICOM SEG: empty label map", path);
    if (source.slices.empty())
        return Status(StatusCode::kFailedPrecondition,
                      "DICOM SEG needs the source DICOM series the label map was computed on; "
                      "this input is not DICOM: write NIfTI/NRRD instead (drop 'seg' from "
                      "--outputs)",
                      path);
    auto acquired = labelsOnAcquiredImages(label_map, source);
    if (!acquired.isOk()) return acquired.status().withContext("DICOM SEG " + path + ": ");
    return writeDicomSeg(*acquired, source, segments, options, path);
}

Result<SegWriteReport> writeLabelMapSeg(const AcquiredLabels& labels, const SeriesCandidate& source,
                                        const std::vector<SegmentDescription>& segments,
                                        const SegWriteOptions& options, const std::string& path) {
    SegWriteOptions o = options;
    o.type = SegType::kLabelMap;
    return writeDicomSeg(labels, source, segments, o, path);
}

Result<SegWriteReport> writeDicomSeg(const AcquiredLabels& labels, const SeriesCandidate& source,
                                     const std::vector<SegmentDescription>& segments,
                                     const SegWriteOptions& options, const std::string& path) {
    const bool label_map = options.type == SegType::kLabelMap;
    const char* kind = label_map ? "Label Map SEG" : "DICOM SEG";
    VOXSEG_RETURN_IF_ERROR(checkSegInputs(labels, source, kind, path));
    const AcquiredPlanes& planes = labels.planes;
    const PixelType type = labels.labels.pixelType();
    AtomicFile out(path);
    VOXSEG_RETURN_IF_ERROR(out.checkWritable());

    const int64_t plane = labels.planeSize();
    const size_t plane_count = planes.planeCount();
    const Presence p = type == PixelType::kUInt8
                           ? presenceOf(labels.plane<uint8_t>(0), plane, plane_count)
                           : presenceOf(labels.plane<uint16_t>(0), plane, plane_count);
    if (p.values.empty())
        return Status(StatusCode::kFailedPrecondition,
                      "the label map is empty (no label found): a DICOM SEG needs at least one "
                      "segment, none written",
                      path);
    // Label map: bits follow the values present (a uint16 map of small labels is 8 bit).
    const int bits = label_map ? (p.values.back() <= 255 ? 8 : 16) : 1;
    int64_t frames = 0;
    const std::vector<std::vector<int64_t>> frame_of = segFrames(p, plane_count, label_map, frames);
    const uint64_t pixel_bytes = static_cast<uint64_t>(plane) * frames * bits / 8;
    if (pixel_bytes >= 0xFFFFFFFEull)
        return unsupported(fmt::format("{}: {} frames of {}x{} exceed the 4 GiB of native pixel "
                                       "data; write NIfTI",
                                       kind, frames, planes.columns, planes.rows),
                           path);

    try {
        VOXSEG_ASSIGN_OR_RETURN(auto files, readSourceHeaders(planes.slices));
        DcmDataset& first = *files.at(planes.slices.front().path).file->getDataset();
        // What is copied from the source and what voxseg writes are both UTF-8 (ISO_IR 192).
        charset::convertItemToUtf8(first);
        DcmFileFormat file;
        DcmDataset& ds = *file.getDataset();
        putCommonModules(ds, first, source, options,
                         label_map ? kLabelMapSegSopClassUid : UID_SegmentationStorage);
        ds.putAndInsertString(DCM_SegmentationType, label_map ? "LABELMAP" : "BINARY");
        ds.putAndInsertUint16(DCM_Rows, static_cast<Uint16>(planes.rows));
        ds.putAndInsertUint16(DCM_Columns, static_cast<Uint16>(planes.columns));
        ds.putAndInsertUint16(DCM_BitsAllocated, static_cast<Uint16>(bits));
        ds.putAndInsertUint16(DCM_BitsStored, static_cast<Uint16>(bits));
        ds.putAndInsertUint16(DCM_HighBit, static_cast<Uint16>(bits - 1));
        if (label_map) ds.putAndInsertUint16(DCM_PixelPaddingValue, 0);  // background: no segment
        ds.putAndInsertString(DCM_NumberOfFrames, std::to_string(frames).c_str());

        // Segments: BINARY numbers them 1..N in label order (the standard's monotonic rule);
        // a label map's SegmentNumber is the pixel value.
        SegWriteReport report;
        report.empty_labels = absentLabels(segments, p.values);
        for (size_t s = 0; s < p.values.size(); ++s) {
            const int value = p.values[s];
            putSegment(ds, static_cast<Uint16>(label_map ? value : static_cast<int>(s) + 1),
                       segmentFor(value, segments), options);
            ++report.segments;
        }
        putDimensions(ds, !label_map);
        putSharedGroupsAndReferences(ds, first, labels, files);

        // Frames, then their pixels in the same order.
        if (label_map) {
            for (size_t k = 0; k < plane_count; ++k)
                if (p.plane_has_label[k])
                    putFrameGroups(ds, planes.slices[k], files.at(planes.slices[k].path), 0,
                                   static_cast<Uint32>(k + 1));
        } else {
            for (size_t s = 0; s < p.values.size(); ++s)
                for (size_t k = 0; k < plane_count; ++k)
                    if (frame_of[s][k] >= 0)
                        putFrameGroups(ds, planes.slices[k], files.at(planes.slices[k].path),
                                       static_cast<Uint16>(s + 1), static_cast<Uint32>(k + 1));
        }
        report.frames = static_cast<int>(frames);
        report.per_frame_references = true;
        report.mapped_to_acquired = labels.resampled;

        VOXSEG_RETURN_IF_ERROR(
            putSegPixelData(ds, labels, p, frame_of, label_map, bits, frames, path));

        const OFCondition saved = file.saveFile(out.tempPath().c_str(), EXS_LittleEndianExplicit);
        if (saved.bad())
            return ioError(std::string("writing the ") + kind + " failed: " + saved.text(), path);
        VOXSEG_RETURN_IF_ERROR(out.commit());
        log::info(kComponent, "wrote {}: {} segment(s), {} frame(s), {} bit", kind, report.segments,
                  report.frames, bits);
        return report;
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory,
                      std::string("out of memory while writing the ") + kind, path);
    }
}

}  // namespace voxseg::io
