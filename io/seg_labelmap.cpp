#include "io/seg_labelmap.h"

#include "core/atomic_file.h"
#include "core/log.h"
#include "io/dicom_nesting.h"
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

// Orientation and pixel measures (shared, or the first frame's), and each frame's position and
// source image.
void readFrameGeometry(DcmDataset& ds, Sint32 frames, SegFrames& out) {
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
}

// The frames' pixel values as planes on the frames' geometry.
Status readLabelPixels(DcmDataset& ds, Uint16 rows, Uint16 columns, Sint32 frames, Uint16 bits,
                       SegFrames& out, const std::string& path) {
    VOXSEG_RETURN_IF_ERROR(
        checkSegPlanes(out.row_dir, out.col_dir, out.spacing[1], out.spacing[0], path));
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
    return Status::ok();
}

// Segments (the background, PixelPaddingValue or else 0, is not one): label, codes, colour from
// CIELab or the palette.
Status readLabelSegments(DcmDataset& ds, SegFrames& out, const std::string& path) {
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
        d.value = number;
        d.name = str(*item, DCM_SegmentLabel);
        d.algorithm_type = str(*item, DCM_SegmentAlgorithmType);
        d.description = str(*item, DCM_SegmentDescription);
        d.category = codeOf(*item, DCM_SegmentedPropertyCategoryCodeSequence);
        d.type = codeOf(*item, DCM_SegmentedPropertyTypeCodeSequence);
        DcmItem* type_item = nullptr;
        if (item->findAndGetSequenceItem(DCM_SegmentedPropertyTypeCodeSequence, type_item, 0)
                .good() &&
            type_item != nullptr) {
            const CodedConcept m =
                codeOf(*type_item, DCM_SegmentedPropertyTypeModifierCodeSequence);
            if (!m.code.empty()) d.type_modifier = m;
        }
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
    return Status::ok();
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

    readFrameGeometry(ds, frames, out);
    VOXSEG_RETURN_IF_ERROR(readLabelPixels(ds, rows, columns, frames, bits, out, path));
    VOXSEG_RETURN_IF_ERROR(readLabelSegments(ds, out, path));
    return out;
}

Result<SegFrames> readLabelMapSegFrames(const std::string& path) {
    VOXSEG_RETURN_IF_ERROR(checkDicomNesting(path));
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
