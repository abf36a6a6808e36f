#include "io/dicom_synth.h"

#include "core/atomic_file.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dctk.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

namespace voxseg::io {

namespace {

std::string ds(double v) {
    // DS is at most 16 characters.
    std::string s = fmt::format("{:.10g}", v);
    if (s.size() > 16) s = fmt::format("{:.8g}", v);
    return s;
}

std::string triplet(const Vec3& v) { return ds(v[0]) + "\\" + ds(v[1]) + "\\" + ds(v[2]); }

Status check(OFCondition cond, const std::string& what, const std::string& path) {
    if (cond.good()) return Status::ok();
    return ioError(what + ": " + cond.text(), path);
}

}  // namespace

std::string makeDicomUid() {
    char buf[100];
    dcmGenerateUniqueIdentifier(buf, SITE_INSTANCE_UID_ROOT);
    return buf;
}

Result<std::vector<std::string>> writeSynthSeries(const SynthSeriesSpec& spec,
                                                  const std::string& folder) {
    if (spec.columns <= 0 || spec.rows <= 0 || spec.slices <= 0)
        return invalidArgument("synthetic series needs positive columns, rows and slices");
    if (!spec.slice_offsets.empty() &&
        spec.slice_offsets.size() != static_cast<size_t>(spec.slices))
        return invalidArgument("slice_offsets must hold one offset per slice");
    if (!spec.slice_positions.empty() &&
        spec.slice_positions.size() != static_cast<size_t>(spec.slices))
        return invalidArgument("slice_positions must hold one position per slice");
    if (spec.bits_stored < 1 || spec.bits_stored > 16)
        return invalidArgument("bits_stored must be 1..16");
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) return ioError("cannot create folder (" + ec.message() + ")", folder);

    const std::string series_uid = spec.series_uid.empty() ? makeDicomUid() : spec.series_uid;
    const std::string study_uid = spec.study_uid.empty() ? makeDicomUid() : spec.study_uid;
    const std::string for_uid =
        spec.frame_of_reference_uid.empty() ? makeDicomUid() : spec.frame_of_reference_uid;
    const std::string sop_class = spec.modality == "MR" ? UID_MRImageStorage : UID_CTImageStorage;
    const Vec3 normal = cross(spec.row_dir, spec.col_dir);

    std::vector<std::string> names(spec.slices);
    std::mt19937 rng(spec.seed);
    for (int k = 0; k < spec.slices; ++k) {
        names[k] = spec.shuffle_names ? fmt::format("{:08x}", static_cast<uint32_t>(rng()))
                                      : fmt::format("{}{:04d}", spec.name_prefix, k + 1);
    }
    const int32_t lo = spec.is_signed ? -(1 << (spec.bits_stored - 1)) : 0;
    const int32_t hi =
        spec.is_signed ? (1 << (spec.bits_stored - 1)) - 1 : (1 << spec.bits_stored) - 1;

    std::vector<std::string> paths;
    std::vector<Uint16> pixels(static_cast<size_t>(spec.columns) * spec.rows);
    for (int k = 0; k < spec.slices; ++k) {
        const double offset =
            spec.slice_offsets.empty() ? k * spec.slice_spacing : spec.slice_offsets[k];
        Vec3 ipp;
        for (int a = 0; a < 3; ++a)
            ipp[a] = spec.origin[a] + offset * normal[a] + k * spec.tilt_shift[a];
        if (!spec.slice_positions.empty()) ipp = spec.slice_positions[static_cast<size_t>(k)];

        DcmFileFormat file;
        DcmDataset* d = file.getDataset();
        const std::string path = (std::filesystem::path(folder) / names[k]).string();
        auto put = [&](const DcmTagKey& tag, const std::string& v) {
            return check(d->putAndInsertString(tag, v.c_str()), "cannot set attribute", path);
        };
        VOXSEG_RETURN_IF_ERROR(put(DCM_SOPClassUID, sop_class));
        VOXSEG_RETURN_IF_ERROR(put(DCM_SOPInstanceUID, makeDicomUid()));
        VOXSEG_RETURN_IF_ERROR(put(DCM_StudyInstanceUID, study_uid));
        VOXSEG_RETURN_IF_ERROR(put(DCM_SeriesInstanceUID, series_uid));
        VOXSEG_RETURN_IF_ERROR(put(DCM_FrameOfReferenceUID, for_uid));
        VOXSEG_RETURN_IF_ERROR(put(DCM_Modality, spec.modality));
        VOXSEG_RETURN_IF_ERROR(put(DCM_SeriesDescription, spec.description));
        VOXSEG_RETURN_IF_ERROR(put(DCM_ImageType, spec.image_type));
        VOXSEG_RETURN_IF_ERROR(put(DCM_PatientName, spec.patient_name));
        VOXSEG_RETURN_IF_ERROR(put(DCM_PatientID, spec.patient_id));
        VOXSEG_RETURN_IF_ERROR(put(DCM_Manufacturer, "voxseg"));
        VOXSEG_RETURN_IF_ERROR(put(DCM_SeriesNumber, std::to_string(spec.series_number)));
        VOXSEG_RETURN_IF_ERROR(
            put(DCM_InstanceNumber, std::to_string(spec.first_instance_number + k)));
        VOXSEG_RETURN_IF_ERROR(put(DCM_ImagePositionPatient, triplet(ipp)));
        VOXSEG_RETURN_IF_ERROR(
            put(DCM_ImageOrientationPatient, triplet(spec.row_dir) + "\\" + triplet(spec.col_dir)));
        VOXSEG_RETURN_IF_ERROR(
            put(DCM_PixelSpacing, ds(spec.row_spacing) + "\\" + ds(spec.column_spacing)));
        VOXSEG_RETURN_IF_ERROR(put(DCM_SliceThickness, ds(std::abs(spec.slice_spacing))));
        if (spec.echo_time > 0) VOXSEG_RETURN_IF_ERROR(put(DCM_EchoTime, ds(spec.echo_time)));
        if (spec.modality == "CT" || spec.slope != 1.0 || spec.intercept != 0.0) {
            VOXSEG_RETURN_IF_ERROR(put(DCM_RescaleSlope, ds(spec.slope)));
            VOXSEG_RETURN_IF_ERROR(put(DCM_RescaleIntercept, ds(spec.intercept)));
        }
        VOXSEG_RETURN_IF_ERROR(put(DCM_PhotometricInterpretation, "MONOCHROME2"));
        VOXSEG_RETURN_IF_ERROR(check(d->putAndInsertUint16(DCM_SamplesPerPixel, 1), "set", path));
        VOXSEG_RETURN_IF_ERROR(check(d->putAndInsertUint16(DCM_Rows, spec.rows), "set", path));
        VOXSEG_RETURN_IF_ERROR(
            check(d->putAndInsertUint16(DCM_Columns, spec.columns), "set", path));
        VOXSEG_RETURN_IF_ERROR(check(d->putAndInsertUint16(DCM_BitsAllocated, 16), "set", path));
        VOXSEG_RETURN_IF_ERROR(
            check(d->putAndInsertUint16(DCM_BitsStored, spec.bits_stored), "set", path));
        VOXSEG_RETURN_IF_ERROR(
            check(d->putAndInsertUint16(DCM_HighBit, spec.bits_stored - 1), "set", path));
        VOXSEG_RETURN_IF_ERROR(check(
            d->putAndInsertUint16(DCM_PixelRepresentation, spec.is_signed ? 1 : 0), "set", path));
        if (spec.ct_image_iod) {
            // Fixed date/time: the series stays byte-for-byte reproducible from its seed.
            for (const auto& [tag, value] :
                 std::initializer_list<std::pair<DcmTagKey, std::string>>{
                     {DCM_SpecificCharacterSet, "ISO_IR 100"},
                     {DCM_PatientBirthDate, ""},
                     {DCM_PatientSex, "O"},
                     {DCM_StudyDate, "20260101"},
                     {DCM_StudyTime, "120000"},
                     {DCM_SeriesDate, "20260101"},
                     {DCM_SeriesTime, "120000"},
                     {DCM_ContentDate, "20260101"},
                     {DCM_ContentTime, "120000"},
                     {DCM_AcquisitionDate, "20260101"},
                     {DCM_AcquisitionTime, "120000"},
                     {DCM_ReferringPhysicianName, ""},
                     {DCM_StudyID, "1"},
                     {DCM_AccessionNumber, ""},
                     {DCM_PatientPosition, "HFS"},
                     {DCM_BodyPartExamined, "ABDOMEN"},
                     {DCM_PositionReferenceIndicator, ""},
                     {DCM_AcquisitionNumber, "1"},
                     {DCM_KVP, "120"},
                     {DCM_ConvolutionKernel, "STANDARD"},
                     {DCM_RescaleType, "HU"},
                     {DCM_WindowCenter, "40"},
                     {DCM_WindowWidth, "400"},
                     {DCM_ManufacturerModelName, "voxseg phantom"},
                     {DCM_SliceLocation, ds(ipp[2])},
                 })
                VOXSEG_RETURN_IF_ERROR(put(tag, value));
        }
        for (int j = 0; j < spec.rows; ++j) {
            for (int i = 0; i < spec.columns; ++i) {
                int32_t v = spec.value ? spec.value(i, j, k) : (i + 3 * j + 7 * k);
                v = std::clamp(v, lo, hi);
                pixels[static_cast<size_t>(j) * spec.columns + i] =
                    static_cast<Uint16>(static_cast<uint32_t>(v) & ((1u << spec.bits_stored) - 1));
            }
        }
        VOXSEG_RETURN_IF_ERROR(
            check(d->putAndInsertUint16Array(DCM_PixelData, pixels.data(),
                                             static_cast<unsigned long>(pixels.size())),
                  "cannot set pixel data", path));

        AtomicFile out(path);
        OFCondition cond = spec.write_meta_header
                               ? file.saveFile(out.tempPath().c_str(), EXS_LittleEndianExplicit)
                               : d->saveFile(out.tempPath().c_str(), EXS_LittleEndianImplicit);
        VOXSEG_RETURN_IF_ERROR(check(cond, "cannot write DICOM file", path));
        VOXSEG_RETURN_IF_ERROR(out.commit());
        paths.push_back(path);
    }
    return paths;
}

}  // namespace voxseg::io
