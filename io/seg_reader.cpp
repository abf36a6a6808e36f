#include "io/seg_reader.h"

#include "core/limits.h"
#include "io/dicom_charset.h"
#include "io/dicom_nesting.h"
#include "io/seg_common.h"
#include "io/seg_labelmap.h"

#include <fmt/format.h>

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
#include <functional>
#include <memory>

namespace voxseg::io {

namespace {

constexpr double kOnGridTolerance = 0.05;  // voxels

// A free-text value dcmseg handed over in the SEG's character set `declared`, as UTF-8.
std::string utf8(const OFString& v, const std::string& declared) {
    return charset::toUtf8(std::string_view(v.c_str(), v.length()), declared);
}

CodedConcept toConcept(CodeSequenceMacro& code, const std::string& declared) {
    CodedConcept c;
    OFString v;
    code.getCodeValue(v);
    c.code = utf8(v, declared);
    code.getCodingSchemeDesignator(v);
    c.scheme = utf8(v, declared);
    code.getCodeMeaning(v);
    c.meaning = utf8(v, declared);
    return c;
}

std::string frameName(size_t f) { return "SEG frame " + std::to_string(f + 1); }

// What placing the frames needs from either kind of SEG (BINARY/FRACTIONAL or LABELMAP).
struct ParsedSeg {
    int64_t rows = 0, cols = 0;
    Vec3 row{1, 0, 0}, col{0, 1, 0};
    Vec3 spacing{1, 1, 1};        // between columns, between rows, slice thickness
    double slice_spacing = 0;     // SpacingBetweenSlices; 0 when absent
    std::vector<Vec3> positions;  // per frame
    int max_value = 0;            // largest label value
    // Label values of frame f (0 = none) into `labels` (rows x columns).
    std::function<Status(size_t f, std::vector<int>& labels)> frame_labels;
};

// dcmseg (3.6.7) counts frames by the functional groups but loads them by NumberOfFrames and
// the pixel attributes, and ignores a failure to load them: with none loaded, getFrame(0) reads
// through a null pointer (fuzz_seg_reader: a BINARY SEG with BitsAllocated 8). So the SEG must
// say what dcmseg will have loaded: BitsAllocated 1 (BINARY) or 8 (FRACTIONAL), NumberOfFrames
// equal to the functional groups' count, and Pixel Data long enough for them.
Status checkBinarySegPixelData(DcmDataset& ds, const std::string& path, bool fractional,
                               size_t num_frames, size_t plane) {
    Uint16 allocated = 0;
    ds.findAndGetUint16(DCM_BitsAllocated, allocated);
    if (allocated != (fractional ? 8 : 1))
        return corruptData(
            fmt::format("{} SEG with BitsAllocated {} (the standard asks {})",
                        fractional ? "FRACTIONAL" : "BINARY", allocated, fractional ? 8 : 1),
            path);
    Sint32 frames = 0;
    ds.findAndGetSint32(DCM_NumberOfFrames, frames);
    if (frames < 0 || static_cast<size_t>(frames) != num_frames)
        return corruptData(fmt::format("NumberOfFrames (0028,0008) is {} but the functional "
                                       "groups describe {} frames",
                                       frames, num_frames),
                           path);
    DcmElement* pixels = nullptr;
    const uint64_t need =
        fractional ? uint64_t{plane} * num_frames : (uint64_t{plane} * num_frames + 7) / 8;
    if (ds.findAndGetElement(DCM_PixelData, pixels).bad() || !pixels || pixels->getLength() < need)
        return corruptData(fmt::format("Pixel Data holds {} bytes; {} frames of {} pixels need {}",
                                       pixels ? pixels->getLength() : 0, num_frames, plane, need),
                           path);
    return Status::ok();
}

// Segments of a BINARY/FRACTIONAL SEG through dcmseg; `seg` keeps the frames alive.
Result<ParsedSeg> parseBinarySeg(DcmDataset& ds, const std::string& path,
                                 const SegReadOptions& options, SegReadResult& result,
                                 std::unique_ptr<DcmSegmentation>& seg) {
    Uint16 rows = 0, cols = 0;
    ds.findAndGetUint16(DCM_Rows, rows);
    ds.findAndGetUint16(DCM_Columns, cols);
    Uint16 max_fractional = 255;
    ds.findAndGetUint16(DCM_MaximumFractionalValue, max_fractional);
    DcmSegmentation* raw = nullptr;
    const OFCondition cond = DcmSegmentation::loadDataset(ds, raw);
    seg.reset(raw);
    if (cond.bad() || !seg)
        return corruptData(std::string("DCMTK cannot load this SEG: ") + cond.text(), path);
    result.fractional = seg->getSegmentationType() == DcmSegTypes::ST_FRACTIONAL;
    const size_t num_frames = seg->getNumberOfFrames();
    if (num_frames == 0 || rows == 0 || cols == 0)
        return corruptData("SEG without frames or with zero rows/columns", path);
    VOXSEG_RETURN_IF_ERROR(checkBinarySegPixelData(ds, path, result.fractional, num_frames,
                                                   static_cast<size_t>(rows) * cols));

    // Segments and their label values.
    auto value_of_segment = std::make_shared<std::map<Uint16, int>>();
    const std::string declared = charset::characterSetOf(&ds);
    for (size_t n = 1; n <= seg->getNumberOfSegments(); ++n) {
        DcmSegment* s = seg->getSegment(n);
        if (!s) continue;
        SegmentDescription d;
        OFString text;
        s->getSegmentLabel(text);
        d.name = utf8(text, declared);
        s->getSegmentDescription(text);
        d.description = utf8(text, declared);
        s->getSegmentAlgorithmName(text);
        d.algorithm_name = utf8(text, declared);
        d.algorithm_type = DcmSegTypes::algoType2OFString(s->getSegmentAlgorithmType()).c_str();
        d.category = toConcept(s->getSegmentedPropertyCategoryCode(), declared);
        d.type = toConcept(s->getSegmentedPropertyTypeCode(), declared);
        OFVector<CodeSequenceMacro*>& modifiers = s->getSegmentedPropertyTypeModifierCode();
        if (!modifiers.empty() && modifiers[0] != nullptr) {
            const CodedConcept m = toConcept(*modifiers[0], declared);
            if (!m.code.empty()) d.type_modifier = m;
        }
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
        auto mapped = options.label_values.find(d.name);
        d.value = mapped != options.label_values.end() ? mapped->second : number;
        (*value_of_segment)[number] = d.value;
        result.segments.push_back(d);
    }

    ParsedSeg p;
    p.rows = rows;
    p.cols = cols;
    for (const auto& [n, v] : *value_of_segment) p.max_value = std::max(p.max_value, v);
    FGInterface& fg = seg->getFunctionalGroups();
    auto segment_of_frame = std::make_shared<std::vector<Uint16>>(num_frames);
    for (size_t f = 0; f < num_frames; ++f) {
        const auto fn = static_cast<Uint32>(f);
        auto* pos = dynamic_cast<FGPlanePosPatient*>(fg.get(fn, DcmFGTypes::EFG_PLANEPOSPATIENT));
        auto* segfg = dynamic_cast<FGSegmentation*>(fg.get(fn, DcmFGTypes::EFG_SEGMENTATION));
        if (!pos || !segfg)
            return corruptData(frameName(f) + " has no plane position or segment identification",
                               path);
        Float64 x = 0, y = 0, z = 0;
        if (pos->getImagePositionPatient(x, y, z).bad())
            return corruptData(frameName(f) + ": bad ImagePositionPatient", path);
        p.positions.push_back({x, y, z});
        segfg->getReferencedSegmentNumber((*segment_of_frame)[f]);
        if (f == 0) {
            auto* ori = dynamic_cast<FGPlaneOrientationPatient*>(
                fg.get(fn, DcmFGTypes::EFG_PLANEORIENTPATIENT));
            auto* pm = dynamic_cast<FGPixelMeasures*>(fg.get(fn, DcmFGTypes::EFG_PIXELMEASURES));
            if (!ori || !pm)
                return corruptData("SEG without plane orientation or pixel measures", path);
            Float64 v[6] = {1, 0, 0, 0, 1, 0};
            ori->getImageOrientationPatient(v[0], v[1], v[2], v[3], v[4], v[5]);
            p.row = {v[0], v[1], v[2]};
            p.col = {v[3], v[4], v[5]};
            Float64 ps = 1;
            if (pm->getPixelSpacing(ps, 0).good()) p.spacing[1] = ps;  // between rows
            if (pm->getPixelSpacing(ps, 1).good()) p.spacing[0] = ps;  // between columns
            Float64 sbs = 0;
            if (pm->getSpacingBetweenSlices(sbs).good() && sbs > 0)
                p.slice_spacing = sbs;
            else if (pm->getSliceThickness(sbs).good() && sbs > 0)
                p.spacing[2] = sbs;
        }
    }
    const Uint8 threshold = result.fractional ? static_cast<Uint8>((max_fractional + 1) / 2) : 1;
    const bool fractional = result.fractional;
    DcmSegmentation* doc = seg.get();
    p.frame_labels = [=](size_t f, std::vector<int>& labels) -> Status {
        const DcmIODTypes::Frame* frame = doc->getFrame(f);
        if (!frame) return corruptData(frameName(f) + " missing", path);
        const size_t plane = static_cast<size_t>(rows) * cols;
        std::unique_ptr<DcmIODTypes::Frame> unpacked;
        const Uint8* pixels = frame->pixData;
        if (!fractional) {
            unpacked.reset(DcmSegUtils::unpackBinaryFrame(frame, rows, cols));
            if (!unpacked) return corruptData("cannot unpack " + frameName(f), path);
            pixels = unpacked->pixData;
        } else if (frame->length < plane) {
            return corruptData(frameName(f) + " is short", path);
        }
        const Uint16 segment = (*segment_of_frame)[f];
        auto it = value_of_segment->find(segment);
        const int label = it != value_of_segment->end() ? it->second : segment;
        for (size_t n = 0; n < plane; ++n) labels[n] = pixels[n] >= threshold ? label : 0;
        return Status::ok();
    };
    return p;
}

// A Label Map SEG (io/seg_labelmap.h): pixel value = segment number.
Result<ParsedSeg> parseLabelMapSeg(DcmDataset& ds, const std::string& path,
                                   const SegReadOptions& options, SegReadResult& result,
                                   std::shared_ptr<SegFrames>& frames) {
    VOXSEG_ASSIGN_OR_RETURN(SegFrames parsed, readLabelMapSegFrames(ds, path));
    if (parsed.slide_coordinates)
        return unsupported("Label Map SEG in slide coordinates (microscopy): no patient grid",
                           path);
    frames = std::make_shared<SegFrames>(std::move(parsed));
    ParsedSeg p;
    const Geometry g = frames->planes.geometry();
    p.cols = g.size[0];
    p.rows = g.size[1];
    p.row = frames->row_dir;
    p.col = frames->col_dir;
    p.spacing = {frames->spacing[1], frames->spacing[0],
                 frames->slice_thickness > 0 ? frames->slice_thickness : 1.0};
    p.positions = frames->positions;
    if (p.positions.empty() || p.rows == 0 || p.cols == 0)
        return corruptData("SEG without frames or with zero rows/columns", path);
    auto value_of_segment = std::make_shared<std::map<int, int>>();
    for (SegmentDescription d : frames->segments) {
        const int number = d.value;
        auto mapped = options.label_values.find(d.name);
        if (mapped != options.label_values.end()) d.value = mapped->second;
        (*value_of_segment)[number] = d.value;
        p.max_value = std::max(p.max_value, d.value);
        result.segments.push_back(d);
    }
    result.referenced_series_uid = frames->referenced_series_uid;
    result.frame_of_reference_uid = frames->frame_of_reference_uid;
    const std::shared_ptr<const SegFrames> keep = frames;
    p.frame_labels = [keep, value_of_segment, rows = p.rows, cols = p.cols](
                         size_t f, std::vector<int>& labels) -> Status {
        const size_t plane = static_cast<size_t>(rows * cols);
        auto copy = [&](const auto* data) {
            const auto* src = data + f * plane;
            for (size_t n = 0; n < plane; ++n) {
                const int number = static_cast<int>(src[n]);
                auto it = value_of_segment->find(number);
                labels[n] = it != value_of_segment->end() ? it->second : 0;
            }
        };
        if (keep->planes.pixelType() == PixelType::kUInt8)
            copy(keep->planes.data<uint8_t>());
        else
            copy(keep->planes.data<uint16_t>());
        return Status::ok();
    };
    return p;
}

// The grid the frames go onto: the source series' acquired images, the caller's grid, or one
// derived from the frames (orientation, pixel measures, positions along the normal).
// The grid a SEG's own frames describe, checked before ITK sees it: ITK throws from
// SetDirection on a singular direction (a zero ImageOrientationPatient terminated `voxseg
// edit --labels`, found by fuzz_seg_reader), and positions far apart at a tiny spacing would
// claim more slices than memory holds.
Status checkOwnGrid(const ParsedSeg& p, double slice_spacing, double extent,
                    const std::string& path) {
    VOXSEG_RETURN_IF_ERROR(checkSegPlanes(p.row, p.col, p.spacing[0], p.spacing[1], path));
    if (!std::isfinite(slice_spacing) || slice_spacing <= 0 || !std::isfinite(extent))
        return corruptData("the SEG's slice spacing or frame positions are not usable", path);
    const double slices = extent / slice_spacing + 1;
    if (slices * static_cast<double>(p.cols) * static_cast<double>(p.rows) >
        static_cast<double>(kDefaultMaxVoxels))
        return unsupported(
            fmt::format("the SEG's frames span {:.0f} slices of {} x {} pixels "
                        "({:.2g} voxels) > limit {:.2g}",
                        slices, p.cols, p.rows, slices * static_cast<double>(p.cols * p.rows),
                        static_cast<double>(kDefaultMaxVoxels)),
            path);
    return Status::ok();
}

Result<Geometry> targetGrid(const ParsedSeg& p, const SegReadOptions& options,
                            const std::string& path) {
    Geometry grid;
    if (options.source) {
        const AcquiredPlanes planes = AcquiredPlanes::of(*options.source);
        if (planes.columns != p.cols || planes.rows != p.rows)
            return invalidArgument("SEG frames are " + std::to_string(p.cols) + "x" +
                                       std::to_string(p.rows) + " but the source series' images " +
                                       std::to_string(planes.columns) + "x" +
                                       std::to_string(planes.rows),
                                   path);
        for (int a = 0; a < 3; ++a)
            if (std::abs(p.row[a] - planes.row_dir[a]) > 1e-4 ||
                std::abs(p.col[a] - planes.col_dir[a]) > 1e-4)
                return invalidArgument(
                    "the SEG's plane orientation differs from its source series' images", path);
        grid = options.source->geometry;
        grid.size = {p.cols, p.rows, static_cast<int64_t>(planes.planeCount())};
        return grid;
    }
    if (options.grid) {
        grid = *options.grid;
        if (grid.size[0] != p.cols || grid.size[1] != p.rows)
            return invalidArgument("SEG frames are " + std::to_string(p.cols) + "x" +
                                       std::to_string(p.rows) + " but the given grid is " +
                                       std::to_string(grid.size[0]) + "x" +
                                       std::to_string(grid.size[1]),
                                   path);
        return grid;
    }
    const Vec3 normal = cross(p.row, p.col);
    std::vector<double> along;
    for (const Vec3& position : p.positions) along.push_back(dot(position, normal));
    std::sort(along.begin(), along.end());
    along.erase(std::unique(along.begin(), along.end(),
                            [](double a, double b) { return std::abs(a - b) < 1e-3; }),
                along.end());
    double slice_spacing = p.slice_spacing;
    if (slice_spacing <= 0) {
        double min_step = 0;
        for (size_t i = 1; i < along.size(); ++i) {
            const double step = along[i] - along[i - 1];
            if (min_step == 0 || step < min_step) min_step = step;
        }
        slice_spacing = min_step > 0 ? min_step : p.spacing[2];
    }
    const double extent = along.back() - along.front();
    VOXSEG_RETURN_IF_ERROR(checkOwnGrid(p, slice_spacing, extent, path));
    grid.size = {p.cols, p.rows, static_cast<int64_t>(std::llround(extent / slice_spacing)) + 1};
    grid.spacing = {p.spacing[0], p.spacing[1], slice_spacing};
    grid.direction = {p.row[0],  p.col[0], normal[0], p.row[1], p.col[1],
                      normal[1], p.row[2], p.col[2],  normal[2]};
    // Origin: the first frame's position moved along the normal to the lowest plane.
    const Vec3& any = p.positions.front();
    const double shift = along.front() - dot(any, normal);
    grid.origin = {any[0] + shift * normal[0], any[1] + shift * normal[1],
                   any[2] + shift * normal[2]};
    return grid;
}

// Plane of the target a frame lies on (a source image, or a slice of the grid); -1 if none.
int64_t planeOf(const Vec3& position, const Geometry& grid, const SeriesCandidate* source) {
    if (source) {
        const double tolerance = std::max(1e-3, 0.05 * source->geometry.spacing[2]);
        for (size_t k = 0; k < source->slices.size(); ++k) {
            const Vec3& q = source->slices[k].position;
            if (std::hypot(q[0] - position[0], q[1] - position[1], q[2] - position[2]) <= tolerance)
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
}

// Paints every frame onto `out` (the target grid): the higher label wins where frames overlap.
Status placeFrames(const ParsedSeg& p, const SegReadOptions& options, const std::string& path,
                   Volume& out, int64_t& overlapping) {
    const Geometry grid = out.geometry();
    const int64_t plane = p.rows * p.cols;
    std::vector<int> labels(static_cast<size_t>(plane));
    for (size_t f = 0; f < p.positions.size(); ++f) {
        const int64_t k = planeOf(p.positions[f], grid, options.source);
        if (k < 0)
            return invalidArgument(
                frameName(f) + (options.source ? " does not lie on a source image"
                                               : " does not lie on a slice of the target grid"),
                path);
        VOXSEG_RETURN_IF_ERROR(p.frame_labels(f, labels));
        auto paint = [&](auto* dst) {
            using T = std::remove_pointer_t<decltype(dst)>;
            T* slice = dst + k * plane;
            for (int64_t n = 0; n < plane; ++n) {
                const int label = labels[static_cast<size_t>(n)];
                if (label == 0) continue;
                if (slice[n] != 0 && slice[n] != static_cast<T>(label)) ++overlapping;
                if (static_cast<int>(slice[n]) < label) slice[n] = static_cast<T>(label);
            }
        };
        if (out.pixelType() == PixelType::kUInt8)
            paint(out.data<uint8_t>());
        else
            paint(out.data<uint16_t>());
    }
    return Status::ok();
}

}  // namespace

Result<SegReadResult> readDicomSeg(const std::string& path, const SegReadOptions& options) {
    VOXSEG_RETURN_IF_ERROR(checkDicomNesting(path));
    DcmFileFormat file;
    OFCondition cond = file.loadFile(path.c_str());
    if (cond.bad()) return corruptData(std::string("cannot read DICOM file: ") + cond.text(), path);
    DcmDataset* ds = file.getDataset();
    OFString sop_class;
    ds->findAndGetOFString(DCM_SOPClassUID, sop_class);
    const bool label_map_seg = sop_class == kLabelMapSegSopClassUid;
    if (!label_map_seg && sop_class != UID_SegmentationStorage)
        return invalidArgument(
            std::string("not a DICOM Segmentation (SOP class ") + sop_class.c_str() + ")", path);

    SegReadResult result;
    OFString value;
    if (ds->findAndGetOFString(DCM_FrameOfReferenceUID, value).good())
        result.frame_of_reference_uid = value.c_str();
    DcmItem* item = nullptr;
    if (ds->findAndGetSequenceItem(DCM_ReferencedSeriesSequence, item, 0).good() && item &&
        item->findAndGetOFString(DCM_SeriesInstanceUID, value).good())
        result.referenced_series_uid = value.c_str();

    if (options.source && !options.source->series_uid.empty() &&
        !result.referenced_series_uid.empty() &&
        result.referenced_series_uid != options.source->series_uid)
        return invalidArgument("the SEG was made on series " + result.referenced_series_uid +
                                   ", not on the given series " + options.source->series_uid +
                                   ": open the series it references",
                               path);
    std::unique_ptr<DcmSegmentation> seg;  // keeps a binary SEG's frames
    std::shared_ptr<SegFrames> frames;     // keeps a label map SEG's frames
    auto parsed = label_map_seg ? parseLabelMapSeg(*ds, path, options, result, frames)
                                : parseBinarySeg(*ds, path, options, result, seg);
    if (!parsed.isOk()) return parsed.status();
    VOXSEG_ASSIGN_OR_RETURN(const Geometry grid, targetGrid(*parsed, options, path));

    Volume out = parsed->max_value <= 255 ? Volume::allocate<uint8_t>(grid)
                                          : Volume::allocate<uint16_t>(grid);
    VOXSEG_RETURN_IF_ERROR(placeFrames(*parsed, options, path, out, result.overlapping_voxels));
    result.frames = static_cast<int>(parsed->positions.size());
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
