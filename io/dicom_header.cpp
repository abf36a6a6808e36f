#include "io/dicom_header.h"

#include "core/limits.h"
#include "core/log.h"
#include "io/dicom_enhanced.h"
#include "io/dicom_inflate_guard.h"
#include "io/dicom_mosaic.h"
#include "io/dicom_nesting.h"
#include "io/dicom_tags.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>

namespace voxseg::io {

namespace {

constexpr Uint32 kMaxReadLength = 64 * 1024;  // larger values (pixel data) are not loaded
// Parsing stops at the first tag above PixelData, so PixelData itself is seen but not read.
const DcmTagKey kStopAfterPixelData(0x7FE0, 0x0011);

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Why a SOP class is not an image series voxseg stacks, or "" when it may be one.
std::string nonImageReason(const std::string& sop_class) {
    if (sop_class == "1.2.840.10008.1.3.10") return "DICOMDIR (directory index, not an image)";
    if (startsWith(sop_class, "1.2.840.10008.5.1.4.1.1.88."))
        return "structured report (SR), not an image";
    if (startsWith(sop_class, "1.2.840.10008.5.1.4.1.1.481."))
        return "radiotherapy object (RT), not an image series";
    if (startsWith(sop_class, "1.2.840.10008.5.1.4.1.1.11."))
        return "presentation state, not an image";
    if (sop_class == "1.2.840.10008.5.1.4.1.1.66.4" || sop_class == "1.2.840.10008.5.1.4.1.1.66.7")
        return "segmentation object (SEG), not an image series";
    if (startsWith(sop_class, "1.2.840.10008.5.1.4.1.1.66"))
        return "raw data / registration / fiducials object, not an image";
    if (startsWith(sop_class, "1.2.840.10008.5.1.4.1.1.104."))
        return "encapsulated document, not an image";
    if (startsWith(sop_class, "1.2.840.10008.5.1.4.1.1.9.")) return "waveform, not an image";
    if (sop_class == "1.2.840.10008.5.1.4.1.1.4.2") return "MR spectroscopy, not an image";
    if (startsWith(sop_class, "1.3.46.670589.11.0.0.12."))
        return "Philips private object (spectrum/series data), not an image";
    return {};
}

Vec3 normalized(const Vec3& v) {
    double n = norm(v);
    return n > 0 ? Vec3{v[0] / n, v[1] / n, v[2] / n} : v;
}

void readGeometry(DcmItem* ds, FrameHeader& f) {
    std::vector<double> ipp = tags::getDoubles(ds, DCM_ImagePositionPatient);
    std::vector<double> iop = tags::getDoubles(ds, DCM_ImageOrientationPatient);
    if (ipp.size() == 3 && iop.size() == 6) {
        f.position = {ipp[0], ipp[1], ipp[2]};
        f.row_dir = normalized({iop[0], iop[1], iop[2]});
        f.col_dir = normalized({iop[3], iop[4], iop[5]});
        f.has_geometry = norm(cross(f.row_dir, f.col_dir)) > 0.5;
    }
    std::vector<double> ps = tags::getDoubles(ds, DCM_PixelSpacing);
    if (ps.size() != 2) ps = tags::getDoubles(ds, DCM_ImagerPixelSpacing);
    if (ps.size() == 2 && ps[0] > 0 && ps[1] > 0) {
        f.row_spacing = ps[0];
        f.column_spacing = ps[1];
        f.has_pixel_spacing = true;
    }
    double thickness = tags::getDouble(ds, DCM_SliceThickness, 0, kUnset);
    if (thickness > 0) f.slice_thickness = thickness;
    double between = tags::getDouble(ds, DCM_SpacingBetweenSlices, 0, kUnset);
    if (between > 0) f.spacing_between_slices = between;
}

FrameHeader readClassic(DcmFileFormat& file, const std::string& path) {
    DcmDataset* ds = file.getDataset();
    DcmMetaInfo* meta = file.getMetaInfo();
    FrameHeader f;
    f.path = path;
    f.sop_class_uid = tags::getString(ds, DCM_SOPClassUID);
    if (f.sop_class_uid.empty())
        f.sop_class_uid = tags::getString(meta, DCM_MediaStorageSOPClassUID);
    f.sop_instance_uid = tags::getString(ds, DCM_SOPInstanceUID);
    if (f.sop_instance_uid.empty())
        f.sop_instance_uid = tags::getString(meta, DCM_MediaStorageSOPInstanceUID);
    f.series_uid = tags::getString(ds, DCM_SeriesInstanceUID);
    f.study_uid = tags::getString(ds, DCM_StudyInstanceUID);
    f.frame_of_reference_uid = tags::getString(ds, DCM_FrameOfReferenceUID);
    f.modality = tags::getString(ds, DCM_Modality);
    f.description = tags::getString(ds, DCM_SeriesDescription);
    f.manufacturer = tags::getString(ds, DCM_Manufacturer);
    f.image_type = tags::getString(ds, DCM_ImageType);
    f.transfer_syntax_uid = tags::getString(meta, DCM_TransferSyntaxUID);
    f.series_number = tags::getInt(ds, DCM_SeriesNumber, 0);
    f.instance_number = tags::getInt(ds, DCM_InstanceNumber, 0);
    f.acquisition_number = tags::getInt(ds, DCM_AcquisitionNumber, 0);
    f.patient.name = tags::getString(ds, DCM_PatientName);
    f.patient.id = tags::getString(ds, DCM_PatientID);
    f.patient.birth_date = tags::getString(ds, DCM_PatientBirthDate);
    f.rows = tags::getInt(ds, DCM_Rows, 0);
    f.columns = tags::getInt(ds, DCM_Columns, 0);
    f.samples_per_pixel = tags::getInt(ds, DCM_SamplesPerPixel, 1);
    readGeometry(ds, f);
    f.echo_time = tags::getDouble(ds, DCM_EchoTime, 0, kUnset);
    f.echo_number = tags::getInt(ds, DCM_EchoNumbers, -1);
    f.temporal_position = tags::getInt(ds, DCM_TemporalPositionIdentifier, -1);
    f.trigger_time = tags::getDouble(ds, DCM_TriggerTime, 0, kUnset);
    f.acquisition_time = tags::getString(ds, DCM_AcquisitionTime);
    f.slope = tags::getDouble(ds, DCM_RescaleSlope, 0, 1.0);
    f.intercept = tags::getDouble(ds, DCM_RescaleIntercept, 0, 0.0);
    if (f.slope == 0 || !std::isfinite(f.slope)) f.slope = 1;  // 0 would erase the image
    if (!std::isfinite(f.intercept)) f.intercept = 0;
    DcmTagKey philips = tags::privateTag(ds, 0x2005, "Philips MR Imaging DD 001", 0x0E);
    if (philips.getGroup() != 0) {
        Float32 v = 0;
        if (ds->findAndGetFloat32(philips, v).good() && v != 0 && std::isfinite(v))
            f.philips_scale_slope = v;
    }
    return f;
}

}  // namespace

bool looksLikeDicom(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    unsigned char buf[132] = {};
    in.read(reinterpret_cast<char*>(buf), sizeof(buf));
    const std::streamsize got = in.gcount();
    if (got >= 132 && std::memcmp(buf + 128, "DICM", 4) == 0) return true;
    if (got < 8) return false;
    // A dataset without meta header starts with a low group (0002..0028), little or big endian,
    // and a small element number; text, NIfTI and images fail this.
    auto plausible = [](unsigned group, unsigned element) {
        return group >= 0x0002 && group <= 0x0028 && group % 2 == 0 && element < 0x2000;
    };
    unsigned le_group = buf[0] | (buf[1] << 8);
    unsigned le_element = buf[2] | (buf[3] << 8);
    unsigned be_group = (buf[0] << 8) | buf[1];
    unsigned be_element = (buf[2] << 8) | buf[3];
    return plausible(le_group, le_element) || plausible(be_group, be_element);
}

FileHeaders readDicomHeaders(const std::string& path) {
    FileHeaders out;
    const std::string name = std::filesystem::path(path).filename().string();
    if (!looksLikeDicom(path)) {
        out.skip_reason = "not DICOM (no DICM prefix, no plausible dataset start)";
        return out;
    }
    if (const Status inflated = checkInflatedSize(path); !inflated.isOk()) {
        out.skip_reason = inflated.message();
        return out;
    }
    // The whole file, not only up to the pixel data: later stages (pixel reader, SEG and
    // RTSTRUCT writers) parse all of it, and a file refused here never reaches them.
    if (const Status nesting = checkDicomNesting(path); !nesting.isOk()) {
        out.skip_reason = nesting.message();
        return out;
    }
    DcmFileFormat file;
    OFCondition cond = file.loadFileUntilTag(path.c_str(), EXS_Unknown, EGL_noChange,
                                             kMaxReadLength, ERM_autoDetect, kStopAfterPixelData);
    if (cond.bad()) {
        out.skip_reason = std::string("unreadable DICOM header (") + cond.text() + ")";
        return out;
    }
    DcmDataset* ds = file.getDataset();
    if (ds->tagExists(DCM_DirectoryRecordSequence)) {
        out.skip_reason = name == "DIRFILE" ? "Philips DIRFILE (directory index, not an image)"
                                            : "DICOMDIR (directory index, not an image)";
        return out;
    }
    FrameHeader base = readClassic(file, path);
    if (base.sop_class_uid.empty() && base.modality.empty() && base.rows == 0) {
        out.skip_reason = "not DICOM (parsed, but no SOP class, modality or image attributes)";
        return out;
    }
    if (std::string reason = nonImageReason(base.sop_class_uid); !reason.empty()) {
        out.skip_reason = reason;
        return out;
    }
    if (!ds->tagExists(DCM_PixelData) && !ds->tagExists(DCM_FloatPixelData) &&
        !ds->tagExists(DCM_DoubleFloatPixelData)) {
        out.skip_reason = "no pixel data";
        return out;
    }
    if (base.rows <= 0 || base.columns <= 0) {
        out.skip_reason = "pixel data without Rows/Columns";
        return out;
    }
    if (base.samples_per_pixel != 1) {
        out.skip_reason = "colour image (SamplesPerPixel " +
                          std::to_string(base.samples_per_pixel) +
                          "): voxseg reads monochrome images only";
        return out;
    }
    const int num_frames = std::max(1, tags::getInt(ds, DCM_NumberOfFrames, 1));
    // The voxel limit is loadSeries()' (--max-voxels); here only the per-frame list is at stake.
    if (num_frames > readLimits().frames_per_file) {
        out.skip_reason = fmt::format(
            "claims {} frames > limit {} frames per file; raise --max-frames-per-file if this is "
            "real",
            num_frames, readLimits().frames_per_file);
        return out;
    }
    if (num_frames > 1 || ds->tagExists(DCM_PerFrameFunctionalGroupsSequence)) {
        std::string error;
        out.frames = expandMultiFrame(ds, base, num_frames, error);
        if (out.frames.empty()) out.skip_reason = error;
        return out;
    }
    MosaicInfo mosaic = readMosaicInfo(ds, base);
    if (mosaic.is_mosaic) {
        std::string error;
        out.frames = expandMosaic(base, mosaic, error);
        if (out.frames.empty()) out.skip_reason = error;
        return out;
    }
    out.frames.push_back(std::move(base));
    return out;
}

namespace {

// A Referenced File ID is a list of path components below the DICOMDIR's folder (PS3.10 8.5:
// up to 8 characters of A-Z, 0-9 and _); one that is "." or "..", or carries a path separator
// or a drive, would name a file elsewhere.
bool fileIdStaysInside(const std::string& id) {
    size_t start = 0;
    while (start <= id.size()) {
        size_t end = id.find('\\', start);
        if (end == std::string::npos) end = id.size();
        const std::string part = id.substr(start, end - start);
        if (part == "." || part == ".." || part.find_first_of("/:") != std::string::npos)
            return false;
        start = end + 1;
    }
    return true;
}

Result<std::vector<std::string>> readDicomdirRecords(const std::string& path) {
    VOXSEG_RETURN_IF_ERROR(checkDicomNesting(path));
    DcmFileFormat file;
    OFCondition cond = file.loadFile(path.c_str());
    if (cond.bad())
        return corruptData(std::string("cannot read DICOMDIR (") + cond.text() + ")", path);
    DcmSequenceOfItems* records = nullptr;
    if (file.getDataset()->findAndGetSequence(DCM_DirectoryRecordSequence, records).bad() ||
        !records)
        return corruptData("DICOMDIR without DirectoryRecordSequence", path);
    const std::filesystem::path root = std::filesystem::path(path).parent_path();
    std::vector<std::string> files;
    for (unsigned long i = 0; i < records->card(); ++i) {
        DcmItem* record = records->getItem(i);
        std::string id = tags::getString(record, DCM_ReferencedFileID);
        if (id.empty()) continue;
        if (!fileIdStaysInside(id)) {
            log::warning("io.dicom",
                         "{}: directory record {} references '{}', outside the "
                         "DICOMDIR's folder: skipped",
                         path, i + 1, id);
            continue;
        }
        std::filesystem::path p = root;
        size_t start = 0;
        while (start <= id.size()) {
            size_t end = id.find('\\', start);
            if (end == std::string::npos) end = id.size();
            if (end > start) p /= id.substr(start, end - start);
            start = end + 1;
        }
        // Media file IDs are upper case; a copy on a case-sensitive disk may not be.
        if (!std::filesystem::exists(p)) {
            std::filesystem::path lower = root;
            std::string rel = id;
            std::transform(rel.begin(), rel.end(), rel.begin(), ::tolower);
            std::replace(rel.begin(), rel.end(), '\\', '/');
            lower /= rel;
            if (std::filesystem::exists(lower)) p = lower;
        }
        files.push_back(p.string());
    }
    return files;
}

}  // namespace

Result<std::vector<std::string>> readDicomdir(const std::string& path) {
    // DCMTK throws from inside loadFile on some damaged directory records (std::out_of_range
    // from DcmByteString::verify, found by fuzz_dicomdir).
    try {
        return readDicomdirRecords(path);
    } catch (const std::exception& e) {
        return corruptData(std::string("cannot read DICOMDIR (") + e.what() + ")", path);
    }
}

}  // namespace voxseg::io
