#include "io/seg_reader.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmfg/fginterface.h>
#include <dcmtk/dcmfg/fgpixmsr.h>
#include <dcmtk/dcmfg/fgplanor.h>
#include <dcmtk/dcmfg/fgplanpo.h>
#include <dcmtk/dcmfg/fgseg.h>
#include <dcmtk/dcmiod/cielabutil.h>
#include <dcmtk/dcmseg/segdoc.h>
#include <dcmtk/dcmseg/segment.h>
#include <dcmtk/dcmseg/segutils.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace voxseg::io {

namespace {

constexpr const char* kLabelMapSegSopClass = "1.2.840.10008.5.1.4.1.1.66.7";
constexpr double kOnGridTolerance = 0.05;  // voxels

CodedConcept toConcept(CodeSequenceMacro& code) {
    CodedConcept c;
    OFString v;
    code.getCodeValue(v);
    c.code = v.c_str();
    code.getCodingSchemeDesignator(v);
    c.scheme = v.c_str();
    code.getCodeMeaning(v);
    c.meaning = v.c_str();
    return c;
}

struct FrameInfo {
    Vec3 position{0, 0, 0};
    Uint16 segment = 0;
};

}  // namespace

Result<SegReadResult> readDicomSeg(const std::string& path, const SegReadOptions& options) {
    DcmFileFormat file;
    OFCondition cond = file.loadFile(path.c_str());
    if (cond.bad()) return corruptData(std::string("cannot read DICOM file: ") + cond.text(), path);
    DcmDataset* ds = file.getDataset();
    OFString sop_class;
    ds->findAndGetOFString(DCM_SOPClassUID, sop_class);
    if (sop_class == kLabelMapSegSopClass)
        return unsupported(
            "Label Map Segmentation objects are not readable with this DCMTK "
            "(3.6.7); convert it to a BINARY SEG (e.g. with highdicom)",
            path);
    if (sop_class != UID_SegmentationStorage)
        return invalidArgument(
            std::string("not a DICOM Segmentation (SOP class ") + sop_class.c_str() + ")", path);
    Uint16 rows = 0, cols = 0;
    ds->findAndGetUint16(DCM_Rows, rows);
    ds->findAndGetUint16(DCM_Columns, cols);
    Uint16 max_fractional = 255;
    ds->findAndGetUint16(DCM_MaximumFractionalValue, max_fractional);

    SegReadResult result;
    OFString value;
    if (ds->findAndGetOFString(DCM_FrameOfReferenceUID, value).good())
        result.frame_of_reference_uid = value.c_str();
    if (ds->findAndGetOFString(DCM_SeriesInstanceUID, value, 0, OFTrue).good()) {
        DcmItem* item = nullptr;
        if (ds->findAndGetSequenceItem(DCM_ReferencedSeriesSequence, item, 0).good() && item &&
            item->findAndGetOFString(DCM_SeriesInstanceUID, value).good())
            result.referenced_series_uid = value.c_str();
    }

    DcmSegmentation* raw = nullptr;
    cond = DcmSegmentation::loadDataset(*ds, raw);
    std::unique_ptr<DcmSegmentation> seg(raw);
    if (cond.bad() || !seg)
        return corruptData(std::string("DCMTK cannot load this SEG: ") + cond.text(), path);
    result.fractional = seg->getSegmentationType() == DcmSegTypes::ST_FRACTIONAL;
    const size_t num_frames = seg->getNumberOfFrames();
    if (num_frames == 0 || rows == 0 || cols == 0)
        return corruptData("SEG without frames or with zero rows/columns", path);

    // Segments and their label values.
    std::map<Uint16, int> value_of_segment;
    for (size_t n = 1; n <= seg->getNumberOfSegments(); ++n) {
        DcmSegment* s = seg->getSegment(n);
        if (!s) continue;
        SegmentDescription d;
        OFString text;
        s->getSegmentLabel(text);
        d.label = text.c_str();
        s->getSegmentDescription(text);
        d.description = text.c_str();
        s->getSegmentAlgorithmName(text);
        d.algorithm_name = text.c_str();
        d.category = toConcept(s->getSegmentedPropertyCategoryCode());
        d.type = toConcept(s->getSegmentedPropertyTypeCode());
        Uint16 L = 0, a = 0, b = 0;
        if (s->getRecommendedDisplayCIELabValue(L, a, b).good()) {
            double r = 0, g = 0, bl = 0;
            IODCIELabUtil::dicomLab2RGB(r, g, bl, L, a, b);
            d.color = {static_cast<uint8_t>(std::lround(std::clamp(r, 0.0, 1.0) * 255)),
                       static_cast<uint8_t>(std::lround(std::clamp(g, 0.0, 1.0) * 255)),
                       static_cast<uint8_t>(std::lround(std::clamp(bl, 0.0, 1.0) * 255))};
        }
        const Uint16 number =
            s->getSegmentNumber() ? s->getSegmentNumber() : static_cast<Uint16>(n);
        auto mapped = options.label_values.find(d.label);
        d.label_value = mapped != options.label_values.end() ? mapped->second : number;
        value_of_segment[number] = d.label_value;
        result.segments.push_back(d);
    }

    // Geometry of the frames.
    FGInterface& fg = seg->getFunctionalGroups();
    std::vector<FrameInfo> frames(num_frames);
    Vec3 row{1, 0, 0}, col{0, 1, 0};
    Vec3 spacing{1, 1, 1};
    double slice_spacing = 0.0;
    for (size_t f = 0; f < num_frames; ++f) {
        const auto fn = static_cast<Uint32>(f);
        auto* pos = dynamic_cast<FGPlanePosPatient*>(fg.get(fn, DcmFGTypes::EFG_PLANEPOSPATIENT));
        auto* segfg = dynamic_cast<FGSegmentation*>(fg.get(fn, DcmFGTypes::EFG_SEGMENTATION));
        if (!pos || !segfg)
            return corruptData("SEG frame " + std::to_string(f + 1) +
                                   " has no plane position or segment identification",
                               path);
        Float64 x = 0, y = 0, z = 0;
        if (pos->getImagePositionPatient(x, y, z).bad())
            return corruptData("SEG frame " + std::to_string(f + 1) + ": bad ImagePositionPatient",
                               path);
        frames[f].position = {x, y, z};
        segfg->getReferencedSegmentNumber(frames[f].segment);
        if (f == 0) {
            auto* ori = dynamic_cast<FGPlaneOrientationPatient*>(
                fg.get(fn, DcmFGTypes::EFG_PLANEORIENTPATIENT));
            auto* pm = dynamic_cast<FGPixelMeasures*>(fg.get(fn, DcmFGTypes::EFG_PIXELMEASURES));
            if (!ori || !pm)
                return corruptData("SEG without plane orientation or pixel measures", path);
            Float64 v[6] = {1, 0, 0, 0, 1, 0};
            ori->getImageOrientationPatient(v[0], v[1], v[2], v[3], v[4], v[5]);
            row = {v[0], v[1], v[2]};
            col = {v[3], v[4], v[5]};
            Float64 ps = 1;
            if (pm->getPixelSpacing(ps, 0).good()) spacing[1] = ps;  // between rows
            if (pm->getPixelSpacing(ps, 1).good()) spacing[0] = ps;  // between columns
            Float64 sbs = 0;
            if (pm->getSpacingBetweenSlices(sbs).good() && sbs > 0)
                slice_spacing = sbs;
            else if (pm->getSliceThickness(sbs).good() && sbs > 0)
                spacing[2] = sbs;
        }
    }

    Geometry grid;
    if (options.source) {
        // Frames onto the source slices: planes x rows x columns of the acquired images.
        const AcquiredPlanes planes = AcquiredPlanes::of(*options.source);
        if (planes.columns != cols || planes.rows != rows)
            return invalidArgument("SEG frames are " + std::to_string(cols) + "x" +
                                       std::to_string(rows) + " but the source series' images " +
                                       std::to_string(planes.columns) + "x" +
                                       std::to_string(planes.rows),
                                   path);
        for (int a = 0; a < 3; ++a)
            if (std::abs(row[a] - planes.row_dir[a]) > 1e-4 ||
                std::abs(col[a] - planes.col_dir[a]) > 1e-4)
                return invalidArgument(
                    "the SEG's plane orientation differs from its source series' images", path);
        grid = options.source->geometry;
        grid.size = {cols, rows, static_cast<int64_t>(planes.planeCount())};
    } else if (options.grid) {
        grid = *options.grid;
    } else {
        const Vec3 normal = cross(row, col);
        std::vector<double> along;
        for (const FrameInfo& fi : frames) along.push_back(dot(fi.position, normal));
        std::sort(along.begin(), along.end());
        along.erase(std::unique(along.begin(), along.end(),
                                [](double a, double b) { return std::abs(a - b) < 1e-3; }),
                    along.end());
        if (slice_spacing <= 0) {
            double min_step = 0;
            for (size_t i = 1; i < along.size(); ++i) {
                const double step = along[i] - along[i - 1];
                if (min_step == 0 || step < min_step) min_step = step;
            }
            slice_spacing = min_step > 0 ? min_step : spacing[2];
        }
        spacing[2] = slice_spacing;
        const double extent = along.back() - along.front();
        grid.size = {cols, rows, static_cast<int64_t>(std::llround(extent / slice_spacing)) + 1};
        grid.spacing = spacing;
        grid.direction = {row[0],    col[0], normal[0], row[1],   col[1],
                          normal[1], row[2], col[2],    normal[2]};
        // Origin: the first frame's position moved along the normal to the lowest plane.
        const FrameInfo& any = frames.front();
        const double shift = along.front() - dot(any.position, normal);
        grid.origin = {any.position[0] + shift * normal[0], any.position[1] + shift * normal[1],
                       any.position[2] + shift * normal[2]};
    }
    if (grid.size[0] != cols || grid.size[1] != rows)
        return invalidArgument("SEG frames are " + std::to_string(cols) + "x" +
                                   std::to_string(rows) + " but the given grid is " +
                                   std::to_string(grid.size[0]) + "x" +
                                   std::to_string(grid.size[1]),
                               path);

    int max_value = 0;
    for (const auto& [n, v] : value_of_segment) max_value = std::max(max_value, v);
    Volume out =
        max_value <= 255 ? Volume::allocate<uint8_t>(grid) : Volume::allocate<uint16_t>(grid);
    const int64_t plane = static_cast<int64_t>(rows) * cols;
    const Uint8 threshold = result.fractional ? static_cast<Uint8>((max_fractional + 1) / 2) : 1;

    // Plane of the target a frame lies on (a source slice, or a slice of the grid).
    auto planeOf = [&](const Vec3& position) -> int64_t {
        if (options.source) {
            const std::vector<SliceRef>& slices = options.source->slices;
            const double tolerance = std::max(1e-3, 0.05 * options.source->geometry.spacing[2]);
            for (size_t k = 0; k < slices.size(); ++k) {
                const Vec3& q = slices[k].position;
                if (std::hypot(q[0] - position[0], q[1] - position[1], q[2] - position[2]) <=
                    tolerance)
                    return static_cast<int64_t>(k);
            }
            return -1;
        }
        const Vec3 idx = grid.physicalToIndex(position);
        const double k_round = std::round(idx[2]);
        if (std::abs(idx[0]) > kOnGridTolerance || std::abs(idx[1]) > kOnGridTolerance ||
            std::abs(idx[2] - k_round) > kOnGridTolerance || k_round < 0 ||
            k_round >= static_cast<double>(grid.size[2]))
            return -1;
        return static_cast<int64_t>(k_round);
    };
    for (size_t f = 0; f < num_frames; ++f) {
        const int64_t k = planeOf(frames[f].position);
        if (k < 0)
            return invalidArgument(
                "SEG frame " + std::to_string(f + 1) +
                    (options.source ? " does not lie on a source image"
                                    : " does not lie on a slice of the target grid"),
                path);
        const DcmIODTypes::Frame* frame = seg->getFrame(f);
        if (!frame) return corruptData("SEG frame " + std::to_string(f + 1) + " missing", path);
        std::unique_ptr<DcmIODTypes::Frame> unpacked;
        const Uint8* pixels = frame->pixData;
        if (!result.fractional) {
            unpacked.reset(DcmSegUtils::unpackBinaryFrame(frame, rows, cols));
            if (!unpacked)
                return corruptData("cannot unpack SEG frame " + std::to_string(f + 1), path);
            pixels = unpacked->pixData;
        } else if (frame->length < static_cast<size_t>(plane)) {
            return corruptData("SEG frame " + std::to_string(f + 1) + " is short", path);
        }
        auto it = value_of_segment.find(frames[f].segment);
        const int label = it != value_of_segment.end() ? it->second : frames[f].segment;
        auto paint = [&](auto* dst) {
            using T = std::remove_pointer_t<decltype(dst)>;
            T* slice = dst + k * plane;
            for (int64_t n = 0; n < plane; ++n) {
                if (pixels[n] < threshold) continue;
                if (slice[n] != 0 && slice[n] != static_cast<T>(label)) ++result.overlapping_voxels;
                if (static_cast<int>(slice[n]) < label) slice[n] = static_cast<T>(label);
            }
        };
        if (out.pixelType() == PixelType::kUInt8)
            paint(out.data<uint8_t>());
        else
            paint(out.data<uint16_t>());
        ++result.frames;
    }
    if (options.source) {
        AcquiredLabels acquired;
        acquired.planes = AcquiredPlanes::of(*options.source);
        acquired.labels = out;
        if (options.grid) {
            auto on_grid = labelsOnGrid(acquired, *options.grid);
            if (!on_grid.isOk()) return on_grid.status().withContext(path + ": ");
            acquired.resampled = !on_grid->geometry().approxEqual(out.geometry());
            out = *on_grid;
        }
        result.acquired = std::move(acquired);
    }
    out.info().source = path;
    out.info().modality = "SEG";
    result.label_map = std::move(out);
    return result;
}

}  // namespace voxseg::io
