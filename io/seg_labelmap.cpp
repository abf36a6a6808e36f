#include "io/seg_labelmap.h"

#include "core/atomic_file.h"
#include "core/log.h"
#include "io/seg_common.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcsequen.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcvrda.h>
#include <dcmtk/dcmdata/dcvrtm.h>
#include <dcmtk/dcmiod/cielabutil.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>

namespace voxseg::io {

namespace {

constexpr const char* kComponent = "io.seg";
constexpr const char* kUidRoot = SITE_INSTANCE_UID_ROOT;

std::string str(DcmItem& item, const DcmTagKey& tag) {
    OFString v;
    item.findAndGetOFStringArray(tag, v);
    return v.c_str();
}

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
    item->putAndInsertString(DCM_CodeMeaning, code.meaning.substr(0, 64).c_str());
}

// Copies `tags` present in `from` into `to`; Type 2 ones absent there are written empty.
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

template <typename T>
void histogramOf(const T* data, int64_t plane, size_t planes, std::vector<int64_t>& voxels,
                 std::vector<bool>& plane_has_label) {
    for (size_t k = 0; k < planes; ++k) {
        const T* p = data + static_cast<int64_t>(k) * plane;
        int64_t foreground = 0;
        for (int64_t i = 0; i < plane; ++i) {
            if (p[i] == T(0)) continue;
            ++voxels[p[i]];
            ++foreground;
        }
        plane_has_label[k] = foreground > 0;
    }
}

Status checked(const OFCondition& cond, const std::string& what, const std::string& path) {
    if (cond.good()) return Status::ok();
    return internalError("Label Map SEG: " + what + ": " + cond.text(), path);
}

}  // namespace

Result<SegWriteReport> writeLabelMapSeg(const AcquiredLabels& labels, const SeriesCandidate& source,
                                        const std::vector<SegmentDescription>& segments,
                                        const SegWriteOptions& options, const std::string& path) {
    const AcquiredPlanes& planes = labels.planes;
    if (labels.labels.empty()) return invalidArgument("Label Map SEG: empty label map", path);
    if (labels.labels.pixelType() != PixelType::kUInt8 &&
        labels.labels.pixelType() != PixelType::kUInt16)
        return invalidArgument("Label Map SEG: the label map must be uint8 or uint16", path);
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
            fmt::format("Label Map SEG: label planes are {}x{}x{} but the acquired images are "
                        "{}x{}x{}; map them with labelsOnAcquiredImages()",
                        lg.size[0], lg.size[1], lg.size[2], planes.columns, planes.rows,
                        planes.planeCount()),
            path);
    if (planes.columns > 65535 || planes.rows > 65535)
        return unsupported("Label Map SEG: images larger than 65535 pixels", path);
    AtomicFile out(path);
    VOXSEG_RETURN_IF_ERROR(out.checkWritable());

    const int64_t plane = labels.planeSize();
    const size_t plane_count = planes.planeCount();
    std::vector<int64_t> voxels(labels.labels.pixelType() == PixelType::kUInt8 ? 256 : 65536, 0);
    std::vector<bool> plane_has_label(plane_count, false);
    if (labels.labels.pixelType() == PixelType::kUInt8)
        histogramOf(labels.plane<uint8_t>(0), plane, plane_count, voxels, plane_has_label);
    else
        histogramOf(labels.plane<uint16_t>(0), plane, plane_count, voxels, plane_has_label);
    std::vector<int> present;
    for (size_t v = 1; v < voxels.size(); ++v)
        if (voxels[v] > 0) present.push_back(static_cast<int>(v));
    if (present.empty())
        return Status(StatusCode::kFailedPrecondition,
                      "the label map is empty (no label found): a DICOM SEG needs at least one "
                      "segment, none written",
                      path);
    // Bits follow the values present, not the volume's type (a uint16 map of small labels is 8).
    const int bits = present.back() <= 255 ? 8 : 16;
    const size_t frames =
        static_cast<size_t>(std::count(plane_has_label.begin(), plane_has_label.end(), true));
    const uint64_t pixel_bytes = static_cast<uint64_t>(plane) * frames * (bits / 8);
    if (pixel_bytes >= 0xFFFFFFFEull)
        return unsupported(
            fmt::format("Label Map SEG: {} frames of {}x{} exceed the 4 GiB of native pixel "
                        "data; write a BINARY SEG or NIfTI",
                        frames, planes.columns, planes.rows),
            path);

    try {
        VOXSEG_ASSIGN_OR_RETURN(auto files, readSourceHeaders(planes.slices));
        DcmDataset* first = files.at(planes.slices.front().path).file->getDataset();

        DcmFileFormat file;
        DcmDataset& ds = *file.getDataset();
        char uid[100];

        // SOP Common, Patient, General Study, Patient Study, Frame of Reference: from the source.
        ds.putAndInsertString(DCM_SOPClassUID, kLabelMapSegSopClassUid);
        ds.putAndInsertString(DCM_SOPInstanceUID, dcmGenerateUniqueIdentifier(uid, kUidRoot));
        copyAttributes(*first, ds, {DCM_SpecificCharacterSet}, {});
        copyAttributes(
            *first, ds,
            {DCM_PatientName, DCM_PatientID, DCM_IssuerOfPatientID,
             DCM_IssuerOfPatientIDQualifiersSequence, DCM_PatientBirthDate, DCM_PatientSex,
             DCM_OtherPatientIDsSequence, DCM_PatientAge, DCM_PatientSize, DCM_PatientWeight},
            {DCM_PatientName, DCM_PatientID, DCM_PatientBirthDate, DCM_PatientSex});
        copyAttributes(*first, ds,
                       {DCM_StudyInstanceUID, DCM_StudyDate, DCM_StudyTime,
                        DCM_ReferringPhysicianName, DCM_StudyID, DCM_AccessionNumber,
                        DCM_IssuerOfAccessionNumberSequence, DCM_StudyDescription},
                       {DCM_StudyDate, DCM_StudyTime, DCM_ReferringPhysicianName, DCM_StudyID,
                        DCM_AccessionNumber});
        if (str(ds, DCM_StudyInstanceUID).empty())
            ds.putAndInsertString(DCM_StudyInstanceUID, dcmGenerateUniqueIdentifier(uid, kUidRoot));
        copyAttributes(*first, ds, {DCM_FrameOfReferenceUID, DCM_PositionReferenceIndicator},
                       {DCM_PositionReferenceIndicator});
        if (str(ds, DCM_FrameOfReferenceUID).empty()) {
            ds.putAndInsertString(DCM_FrameOfReferenceUID,
                                  dcmGenerateUniqueIdentifier(uid, kUidRoot));
            log::warning(kComponent,
                         "series {}: no FrameOfReferenceUID in the source; a new one was "
                         "generated for the SEG",
                         source.series_uid);
        }

        // General Series / Segmentation Series, General and Enhanced General Equipment.
        OFString date, time;
        DcmDate::getCurrentDate(date);
        DcmTime::getCurrentTime(time);
        ds.putAndInsertString(DCM_Modality, "SEG");
        ds.putAndInsertString(DCM_SeriesInstanceUID, dcmGenerateUniqueIdentifier(uid, kUidRoot));
        ds.putAndInsertString(DCM_SeriesNumber, std::to_string(options.series_number).c_str());
        ds.putAndInsertString(DCM_SeriesDescription,
                              options.series_description.substr(0, 64).c_str());
        ds.putAndInsertString(DCM_SeriesDate, date.c_str());
        ds.putAndInsertString(DCM_SeriesTime, time.c_str());
        ds.putAndInsertString(DCM_Manufacturer, "voxseg");
        ds.putAndInsertString(DCM_ManufacturerModelName, "voxseg");
        ds.putAndInsertString(DCM_DeviceSerialNumber, "1");
        ds.putAndInsertString(DCM_SoftwareVersions, options.software_version.c_str());

        // General Image, Segmentation Image, Image Pixel, Multi-frame Functional Groups.
        ds.putAndInsertString(DCM_InstanceNumber, "1");
        ds.putAndInsertString(DCM_ContentDate, date.c_str());
        ds.putAndInsertString(DCM_ContentTime, time.c_str());
        ds.putAndInsertString(DCM_InstanceCreationDate, date.c_str());
        ds.putAndInsertString(DCM_InstanceCreationTime, time.c_str());
        ds.putAndInsertString(DCM_ImageType, "DERIVED\\PRIMARY");
        ds.putAndInsertString(DCM_ContentLabel, options.content_label.c_str());
        ds.putAndInsertString(DCM_ContentDescription,
                              options.content_description.substr(0, 64).c_str());
        ds.insertEmptyElement(DCM_ContentCreatorName);
        ds.putAndInsertString(DCM_SegmentationType, "LABELMAP");
        ds.putAndInsertString(DCM_SegmentsOverlap, "NO");  // one value per pixel
        ds.putAndInsertUint16(DCM_SamplesPerPixel, 1);
        ds.putAndInsertString(DCM_PhotometricInterpretation, "MONOCHROME2");
        ds.putAndInsertUint16(DCM_Rows, static_cast<Uint16>(planes.rows));
        ds.putAndInsertUint16(DCM_Columns, static_cast<Uint16>(planes.columns));
        ds.putAndInsertUint16(DCM_BitsAllocated, static_cast<Uint16>(bits));
        ds.putAndInsertUint16(DCM_BitsStored, static_cast<Uint16>(bits));
        ds.putAndInsertUint16(DCM_HighBit, static_cast<Uint16>(bits - 1));
        ds.putAndInsertUint16(DCM_PixelRepresentation, 0);
        ds.putAndInsertUint16(DCM_PixelPaddingValue, 0);  // background: no segment
        ds.putAndInsertString(DCM_LossyImageCompression, "00");
        ds.putAndInsertString(DCM_NumberOfFrames, std::to_string(frames).c_str());

        // Segments: one per label value present, SegmentNumber = label value.
        SegWriteReport report;
        report.empty_labels = absentLabels(segments, present);
        for (int value : present) {
            const SegmentDescription desc = segmentFor(value, segments);
            DcmItem* item = appendItem(ds, DCM_SegmentSequence);
            if (item == nullptr) return internalError("Label Map SEG: segment sequence", path);
            item->putAndInsertUint16(DCM_SegmentNumber, static_cast<Uint16>(value));
            item->putAndInsertString(DCM_SegmentLabel, desc.label.substr(0, 64).c_str());
            if (!desc.description.empty())
                item->putAndInsertString(DCM_SegmentDescription,
                                         desc.description.substr(0, 64).c_str());
            putCode(*item, DCM_SegmentedPropertyCategoryCodeSequence, desc.category);
            putCode(*item, DCM_SegmentedPropertyTypeCodeSequence, desc.type);
            item->putAndInsertString(DCM_SegmentAlgorithmType, "AUTOMATIC");
            item->putAndInsertString(DCM_SegmentAlgorithmName,
                                     options.algorithm_name.substr(0, 64).c_str());
            DcmItem* algo = appendItem(*item, DCM_SegmentationAlgorithmIdentificationSequence);
            if (algo != nullptr) {
                putCode(*algo, DCM_AlgorithmFamilyCodeSequence,
                        {"123110", "DCM", "Artificial Intelligence"});
                algo->putAndInsertString(DCM_AlgorithmName,
                                         options.algorithm_name.substr(0, 64).c_str());
                algo->putAndInsertString(DCM_AlgorithmVersion,
                                         options.algorithm_version.substr(0, 64).c_str());
            }
            double lab[3];
            IODCIELabUtil::rgb2DicomLab(lab[0], lab[1], lab[2], desc.color[0] / 255.0,
                                        desc.color[1] / 255.0, desc.color[2] / 255.0);
            const Uint16 lab16[3] = {static_cast<Uint16>(std::lround(lab[0])),
                                     static_cast<Uint16>(std::lround(lab[1])),
                                     static_cast<Uint16>(std::lround(lab[2]))};
            item->putAndInsertUint16Array(DCM_RecommendedDisplayCIELabValue, lab16, 3);
            ++report.segments;
        }

        // Multi-frame Dimension: plane position only.
        const std::string dim_uid = dcmGenerateUniqueIdentifier(uid, kUidRoot);
        appendItem(ds, DCM_DimensionOrganizationSequence)
            ->putAndInsertString(DCM_DimensionOrganizationUID, dim_uid.c_str());
        {
            DcmItem* dim = appendItem(ds, DCM_DimensionIndexSequence);
            dim->putAndInsertString(DCM_DimensionOrganizationUID, dim_uid.c_str());
            dim->putAndInsertTagKey(DCM_DimensionIndexPointer, DCM_ImagePositionPatient);
            dim->putAndInsertTagKey(DCM_FunctionalGroupPointer, DCM_PlanePositionSequence);
            dim->putAndInsertString(DCM_DimensionDescriptionLabel, "ImagePositionPatient");
        }

        // Shared functional groups: orientation and pixel measures of the acquired images.
        {
            DcmItem* shared = appendItem(ds, DCM_SharedFunctionalGroupsSequence);
            const Vec3& r = planes.row_dir;
            const Vec3& c = planes.col_dir;
            const std::string iop = dsValue(r[0]) + "\\" + dsValue(r[1]) + "\\" + dsValue(r[2]) +
                                    "\\" + dsValue(c[0]) + "\\" + dsValue(c[1]) + "\\" +
                                    dsValue(c[2]);
            appendItem(*shared, DCM_PlaneOrientationSequence)
                ->putAndInsertString(DCM_ImageOrientationPatient, iop.c_str());
            DcmItem* measures = appendItem(*shared, DCM_PixelMeasuresSequence);
            measures->putAndInsertString(
                DCM_PixelSpacing,
                (dsValue(planes.row_spacing) + "\\" + dsValue(planes.column_spacing)).c_str());
            double thickness = planes.slice_thickness;
            if (!(thickness > 0)) first->findAndGetFloat64(DCM_SliceThickness, thickness);
            if (thickness > 0)
                measures->putAndInsertString(DCM_SliceThickness, dsValue(thickness).c_str());
            else
                measures->insertEmptyElement(DCM_SliceThickness);
        }

        // Common Instance Reference: every source instance.
        {
            DcmItem* series_item = appendItem(ds, DCM_ReferencedSeriesSequence);
            series_item->putAndInsertString(DCM_SeriesInstanceUID,
                                            str(*first, DCM_SeriesInstanceUID).c_str());
            std::set<std::string> referenced;
            for (const SliceRef& s : planes.slices) {
                DcmDataset& src = *files.at(s.path).file->getDataset();
                const std::string instance = str(src, DCM_SOPInstanceUID);
                if (instance.empty() || !referenced.insert(instance).second) continue;
                DcmItem* ref = appendItem(*series_item, DCM_ReferencedInstanceSequence);
                ref->putAndInsertString(DCM_ReferencedSOPClassUID,
                                        str(src, DCM_SOPClassUID).c_str());
                ref->putAndInsertString(DCM_ReferencedSOPInstanceUID, instance.c_str());
            }
        }

        // Frames: per-frame position, dimension index and source image; pixels in file order.
        std::vector<Uint8> pixels8;
        std::vector<Uint16> pixels16;
        if (bits == 8)
            pixels8.reserve(static_cast<size_t>(plane) * frames);
        else
            pixels16.reserve(static_cast<size_t>(plane) * frames);
        for (size_t k = 0; k < plane_count; ++k) {
            if (!plane_has_label[k]) continue;  // empty frames omitted
            const SliceRef& s = planes.slices[k];
            DcmItem* fg = appendItem(ds, DCM_PerFrameFunctionalGroupsSequence);
            if (fg == nullptr) return internalError("Label Map SEG: per-frame groups", path);
            {
                DcmItem* derivation = appendItem(*fg, DCM_DerivationImageSequence);
                putCode(*derivation, DCM_DerivationCodeSequence, {"113076", "DCM", "Segmentation"});
                const SourceHeader& sf = files.at(s.path);
                DcmDataset& src = *sf.file->getDataset();
                DcmItem* image = appendItem(*derivation, DCM_SourceImageSequence);
                image->putAndInsertString(DCM_ReferencedSOPClassUID,
                                          str(src, DCM_SOPClassUID).c_str());
                image->putAndInsertString(DCM_ReferencedSOPInstanceUID,
                                          str(src, DCM_SOPInstanceUID).c_str());
                if (sf.frames > 1)
                    image->putAndInsertString(DCM_ReferencedFrameNumber,
                                              std::to_string(s.frame + 1).c_str());
                putCode(*image, DCM_PurposeOfReferenceCodeSequence,
                        {"121322", "DCM", "Source image for image processing operation"});
                image->putAndInsertString(DCM_SpatialLocationsPreserved, "YES");
            }
            const Uint32 index = static_cast<Uint32>(k + 1);
            appendItem(*fg, DCM_FrameContentSequence)
                ->putAndInsertUint32Array(DCM_DimensionIndexValues, &index, 1);
            const std::string ipp = dsValue(s.position[0]) + "\\" + dsValue(s.position[1]) + "\\" +
                                    dsValue(s.position[2]);
            appendItem(*fg, DCM_PlanePositionSequence)
                ->putAndInsertString(DCM_ImagePositionPatient, ipp.c_str());

            if (labels.labels.pixelType() == PixelType::kUInt8) {
                const uint8_t* p = labels.plane<uint8_t>(k);
                pixels8.insert(pixels8.end(), p, p + plane);  // bits == 8 for uint8
            } else {
                const uint16_t* p = labels.plane<uint16_t>(k);
                if (bits == 8)
                    for (int64_t i = 0; i < plane; ++i) pixels8.push_back(static_cast<Uint8>(p[i]));
                else
                    pixels16.insert(pixels16.end(), p, p + plane);
            }
            ++report.frames;
        }
        report.per_frame_references = true;
        if (bits == 8)
            VOXSEG_RETURN_IF_ERROR(
                checked(ds.putAndInsertUint8Array(DCM_PixelData, pixels8.data(),
                                                  static_cast<unsigned long>(pixels8.size())),
                        "pixel data", path));
        else
            VOXSEG_RETURN_IF_ERROR(
                checked(ds.putAndInsertUint16Array(DCM_PixelData, pixels16.data(),
                                                   static_cast<unsigned long>(pixels16.size())),
                        "pixel data", path));

        const OFCondition saved = file.saveFile(out.tempPath().c_str(), EXS_LittleEndianExplicit);
        if (saved.bad())
            return ioError(std::string("writing the Label Map SEG failed: ") + saved.text(), path);
        VOXSEG_RETURN_IF_ERROR(out.commit());
        log::info(kComponent, "wrote Label Map SEG: {} segment(s), {} frame(s), {} bit",
                  report.segments, report.frames, bits);
        return report;
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory while writing the Label Map SEG",
                      path);
    }
}

namespace {

// The first item of `sequence` in the frame's functional groups, else in the shared ones.
DcmItem* functionalGroup(DcmItem* per_frame, DcmItem* shared, const DcmTagKey& sequence) {
    DcmItem* item = nullptr;
    if (per_frame != nullptr && per_frame->findAndGetSequenceItem(sequence, item, 0).good())
        return item;
    if (shared != nullptr && shared->findAndGetSequenceItem(sequence, item, 0).good()) return item;
    return nullptr;
}

bool getVec(DcmItem& item, const DcmTagKey& tag, double* out, int n) {
    for (int i = 0; i < n; ++i)
        if (item.findAndGetFloat64(tag, out[i], static_cast<unsigned long>(i)).bad()) return false;
    return true;
}

CodedConcept codeOf(DcmItem& parent, const DcmTagKey& sequence) {
    CodedConcept c{"", "", ""};
    DcmItem* item = nullptr;
    if (parent.findAndGetSequenceItem(sequence, item, 0).good() && item != nullptr) {
        c.code = str(*item, DCM_CodeValue);
        c.scheme = str(*item, DCM_CodingSchemeDesignator);
        c.meaning = str(*item, DCM_CodeMeaning);
    }
    return c;
}

// Entry `value` of one palette colour LUT, scaled to 0..255; -1 when not covered.
int paletteEntry(DcmItem& ds, const DcmTagKey& descriptor, const DcmTagKey& data, int value) {
    Uint16 entries = 0, bits = 16;
    Sint32 first_mapped = 0;
    Uint16 first16 = 0;
    if (ds.findAndGetUint16(descriptor, entries, 0).bad()) return -1;
    ds.findAndGetUint16(descriptor, first16, 1);
    first_mapped = first16;
    ds.findAndGetUint16(descriptor, bits, 2);
    const long count = entries == 0 ? 65536 : entries;
    const long i = value - first_mapped;
    if (i < 0 || i >= count) return -1;
    DcmElement* element = nullptr;
    if (ds.findAndGetElement(data, element).bad() || element == nullptr) return -1;
    Uint16* words = nullptr;  // OW: 16-bit words in host order
    if (element->getUint16Array(words).bad() || words == nullptr) return -1;
    const long word_count = static_cast<long>(element->getLength() / 2);
    if (bits == 8 && word_count < count) {
        // 8-bit entries packed two per word (highdicom writes them so), low byte first.
        if (i / 2 >= word_count) return -1;
        return (words[i / 2] >> (8 * (i % 2))) & 0xFF;
    }
    if (i >= word_count) return -1;
    return bits == 8 ? (words[i] & 0xFF) : words[i] >> 8;
}

}  // namespace

Result<SegFrames> readLabelMapSegFrames(DcmDataset& ds, const std::string& path) {
    const std::string sop_class = str(ds, DCM_SOPClassUID);
    if (sop_class != kLabelMapSegSopClassUid && str(ds, DCM_SegmentationType) != "LABELMAP")
        return invalidArgument("not a Label Map SEG (SOP class " + sop_class + ")", path);
    if (ds.chooseRepresentation(EXS_LittleEndianExplicit, nullptr).bad() ||
        !ds.canWriteXfer(EXS_LittleEndianExplicit))
        return unsupported(
            "Label Map SEG: cannot decode its pixel data (transfer syntax has no "
            "codec registered)",
            path);
    Uint16 rows = 0, columns = 0, bits = 0, samples = 1, representation = 0;
    ds.findAndGetUint16(DCM_Rows, rows);
    ds.findAndGetUint16(DCM_Columns, columns);
    ds.findAndGetUint16(DCM_BitsAllocated, bits);
    ds.findAndGetUint16(DCM_SamplesPerPixel, samples);
    ds.findAndGetUint16(DCM_PixelRepresentation, representation);
    Sint32 frames = 1;
    ds.findAndGetSint32(DCM_NumberOfFrames, frames);
    if (rows == 0 || columns == 0 || frames < 1)
        return corruptData("Label Map SEG: no Rows/Columns/NumberOfFrames", path);
    if ((bits != 8 && bits != 16) || samples != 1 || representation != 0)
        return unsupported(fmt::format("Label Map SEG: {} bit, {} samples, pixel representation "
                                       "{} (only unsigned 8/16 bit, 1 sample)",
                                       bits, samples, representation),
                           path);

    SegFrames out;
    out.palette_color = str(ds, DCM_PhotometricInterpretation) == "PALETTE COLOR";
    out.frame_of_reference_uid = str(ds, DCM_FrameOfReferenceUID);
    {
        DcmItem* series = nullptr;
        if (ds.findAndGetSequenceItem(DCM_ReferencedSeriesSequence, series, 0).good())
            out.referenced_series_uid = str(*series, DCM_SeriesInstanceUID);
    }

    DcmItem* shared = nullptr;
    ds.findAndGetSequenceItem(DCM_SharedFunctionalGroupsSequence, shared, 0);
    DcmSequenceOfItems* per_frame = nullptr;
    ds.findAndGetSequence(DCM_PerFrameFunctionalGroupsSequence, per_frame);
    const auto frame_item = [&](long f) -> DcmItem* {
        if (per_frame == nullptr || f >= static_cast<long>(per_frame->card())) return nullptr;
        return per_frame->getItem(static_cast<unsigned long>(f));
    };

    // Orientation and pixel measures (taken from the first frame when not shared).
    double iop[6] = {1, 0, 0, 0, 1, 0};
    if (DcmItem* o = functionalGroup(frame_item(0), shared, DCM_PlaneOrientationSequence)) {
        getVec(*o, DCM_ImageOrientationPatient, iop, 6);
    } else if (getVec(ds, DCM_ImageOrientationSlide, iop, 6)) {
        out.slide_coordinates = true;
    }
    out.row_dir = {iop[0], iop[1], iop[2]};
    out.col_dir = {iop[3], iop[4], iop[5]};
    if (DcmItem* m = functionalGroup(frame_item(0), shared, DCM_PixelMeasuresSequence)) {
        double spacing[2] = {1, 1};
        if (getVec(*m, DCM_PixelSpacing, spacing, 2)) out.spacing = {spacing[0], spacing[1]};
        m->findAndGetFloat64(DCM_SliceThickness, out.slice_thickness);
    }

    for (long f = 0; f < frames; ++f) {
        DcmItem* item = frame_item(f);
        Vec3 p{0, 0, 0};
        if (DcmItem* pos = functionalGroup(item, shared, DCM_PlanePositionSequence)) {
            getVec(*pos, DCM_ImagePositionPatient, p.data(), 3);
        } else if (DcmItem* slide = functionalGroup(item, shared, DCM_PlanePositionSlideSequence)) {
            slide->findAndGetFloat64(DCM_XOffsetInSlideCoordinateSystem, p[0]);
            slide->findAndGetFloat64(DCM_YOffsetInSlideCoordinateSystem, p[1]);
            slide->findAndGetFloat64(DCM_ZOffsetInSlideCoordinateSystem, p[2]);
            out.slide_coordinates = true;
        }
        out.positions.push_back(p);
        std::string instance;
        Sint32 frame_number = 0;
        if (DcmItem* derivation = functionalGroup(item, nullptr, DCM_DerivationImageSequence)) {
            DcmItem* source = nullptr;
            if (derivation->findAndGetSequenceItem(DCM_SourceImageSequence, source, 0).good()) {
                instance = str(*source, DCM_ReferencedSOPInstanceUID);
                source->findAndGetSint32(DCM_ReferencedFrameNumber, frame_number);
            }
        }
        out.referenced_sop_instances.push_back(instance);
        out.referenced_frames.push_back(frame_number);
    }

    // Pixels.
    Geometry g;
    g.size = {columns, rows, frames};
    const Vec3 normal = cross(out.row_dir, out.col_dir);
    g.spacing = {out.spacing[1], out.spacing[0],
                 out.slice_thickness > 0 ? out.slice_thickness : 1.0};
    g.direction = {out.row_dir[0], out.col_dir[0], normal[0],      out.row_dir[1], out.col_dir[1],
                   normal[1],      out.row_dir[2], out.col_dir[2], normal[2]};
    g.origin = out.positions.front();
    const size_t count = static_cast<size_t>(columns) * rows * static_cast<size_t>(frames);
    DcmElement* pixel_data = nullptr;
    if (ds.findAndGetElement(DCM_PixelData, pixel_data).bad() || pixel_data == nullptr)
        return corruptData("Label Map SEG: no PixelData", path);
    if (pixel_data->getLength() < count * (bits / 8))
        return corruptData(
            fmt::format("Label Map SEG: PixelData holds {} bytes, {} frames of "
                        "{}x{} at {} bit need {}",
                        pixel_data->getLength(), frames, columns, rows, bits, count * (bits / 8)),
            path);
    if (bits == 8) {
        Uint8* values = nullptr;
        if (pixel_data->getUint8Array(values).bad() || values == nullptr)
            return corruptData("Label Map SEG: unreadable PixelData", path);
        out.planes = Volume::allocate<uint8_t>(g);
        std::memcpy(out.planes.data<uint8_t>(), values, count);
    } else {
        Uint16* values = nullptr;
        if (pixel_data->getUint16Array(values).bad() || values == nullptr)
            return corruptData("Label Map SEG: unreadable PixelData", path);
        out.planes = Volume::allocate<uint16_t>(g);
        std::memcpy(out.planes.data<uint16_t>(), values, count * 2);
    }

    // Segments (the background, PixelPaddingValue or else 0, is not one).
    Uint16 padding = 0;
    ds.findAndGetUint16(DCM_PixelPaddingValue, padding);
    DcmSequenceOfItems* segments = nullptr;
    if (ds.findAndGetSequence(DCM_SegmentSequence, segments).bad() || segments == nullptr ||
        segments->card() == 0)
        return corruptData("Label Map SEG: no SegmentSequence", path);
    for (unsigned long i = 0; i < segments->card(); ++i) {
        DcmItem* item = segments->getItem(i);
        Uint16 number = 0;
        if (item->findAndGetUint16(DCM_SegmentNumber, number).bad())
            return corruptData("Label Map SEG: segment without SegmentNumber", path);
        if (number == padding || number == 0) continue;
        SegmentDescription d;
        d.label_value = number;
        d.label = str(*item, DCM_SegmentLabel);
        d.description = str(*item, DCM_SegmentDescription);
        d.category = codeOf(*item, DCM_SegmentedPropertyCategoryCodeSequence);
        d.type = codeOf(*item, DCM_SegmentedPropertyTypeCodeSequence);
        d.algorithm_name = str(*item, DCM_SegmentAlgorithmName);
        Uint16 lab[3];
        if (item->findAndGetUint16(DCM_RecommendedDisplayCIELabValue, lab[0], 0).good() &&
            item->findAndGetUint16(DCM_RecommendedDisplayCIELabValue, lab[1], 1).good() &&
            item->findAndGetUint16(DCM_RecommendedDisplayCIELabValue, lab[2], 2).good()) {
            double rgb[3];
            IODCIELabUtil::dicomLab2RGB(rgb[0], rgb[1], rgb[2], lab[0], lab[1], lab[2]);
            for (int c = 0; c < 3; ++c)
                d.color[c] = static_cast<uint8_t>(
                    std::clamp(std::lround(rgb[c] * 255.0), long{0}, long{255}));
        } else if (out.palette_color) {
            const int r = paletteEntry(ds, DCM_RedPaletteColorLookupTableDescriptor,
                                       DCM_RedPaletteColorLookupTableData, number);
            const int gr = paletteEntry(ds, DCM_GreenPaletteColorLookupTableDescriptor,
                                        DCM_GreenPaletteColorLookupTableData, number);
            const int b = paletteEntry(ds, DCM_BluePaletteColorLookupTableDescriptor,
                                       DCM_BluePaletteColorLookupTableData, number);
            if (r >= 0 && gr >= 0 && b >= 0)
                d.color = {static_cast<uint8_t>(r), static_cast<uint8_t>(gr),
                           static_cast<uint8_t>(b)};
        }
        out.segments.push_back(std::move(d));
    }
    return out;
}

Result<SegFrames> readLabelMapSegFrames(const std::string& path) {
    DcmFileFormat file;
    const OFCondition cond = file.loadFile(path.c_str());
    if (cond.bad()) return ioError(std::string("cannot read DICOM file: ") + cond.text(), path);
    try {
        return readLabelMapSegFrames(*file.getDataset(), path);
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory while reading the Label Map SEG",
                      path);
    }
}

Result<SegReadResult> readLabelMapSeg(const std::string& path, DcmDataset& dataset) {
    VOXSEG_ASSIGN_OR_RETURN(SegFrames frames, readLabelMapSegFrames(dataset, path));
    SegReadResult result;
    result.frames = static_cast<int>(frames.positions.size());
    result.label_map = std::move(frames.planes);
    result.segments = std::move(frames.segments);
    result.referenced_series_uid = std::move(frames.referenced_series_uid);
    result.frame_of_reference_uid = std::move(frames.frame_of_reference_uid);
    return result;
}

}  // namespace voxseg::io
