#include "pipeline/segmentation_files.h"

#include "io/acquired_labels.h"
#include "io/image_io.h"
#include "io/rtstruct_reader.h"
#include "io/rtstruct_writer.h"
#include "io/seg_reader.h"
#include "pipeline/pixel_dispatch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

namespace voxseg::pipeline {

namespace {

bool resampled(const io::SeriesCandidate& s) {
    return s.has_patient_geometry && (s.tilted || s.uneven_spacing || s.has_gaps);
}

}  // namespace

Result<SegmentationFile> readSegmentationFile(const std::string& path, const Geometry& grid,
                                              const io::SeriesCandidate* series,
                                              const Progress& progress) {
    SegmentationFile out;
    if (io::isImageFile(path)) {
        VOXSEG_ASSIGN_OR_RETURN(out.label_map, io::readImage(path, progress));
        out.kind = "label map";
        return out;
    }
    if (io::isRtStruct(path)) {
        if (!series)
            return Status(StatusCode::kFailedPrecondition,
                          "an RTSTRUCT outlines the images of a DICOM series: open that series "
                          "(not an image file) first",
                          path);
        io::RtStructReadOptions options;
        options.grid = grid;
        VOXSEG_ASSIGN_OR_RETURN(io::RtStructReadResult rt,
                                io::readRtStruct(path, *series, options));
        out.kind = "RTSTRUCT";
        out.label_map = std::move(*rt.grid_labels);
        for (const io::RtRoi& roi : rt.rois) out.segments.push_back(roi.description);
        out.overlapping_voxels = rt.overlapping_voxels;
        out.warnings = std::move(rt.warnings);
        return out;
    }
    io::SegReadOptions options;
    options.grid = grid;
    // A regular series' grid planes are its images; a resampled one's SEG frames are placed on
    // the acquired images first.
    if (series && resampled(*series)) options.source = series;
    VOXSEG_ASSIGN_OR_RETURN(io::SegReadResult seg, io::readDicomSeg(path, options));
    out.kind = "DICOM SEG";
    out.label_map = std::move(seg.label_map);
    out.segments = std::move(seg.segments);
    out.overlapping_voxels = seg.overlapping_voxels;
    return out;
}

Status writeDicomSegmentation(DicomSegmentationKind kind, const io::AcquiredLabels& labels,
                              const io::SeriesCandidate& series,
                              const std::vector<io::SegmentDescription>& segments,
                              const DicomSegmentationOptions& options, const std::string& path) {
    if (kind == DicomSegmentationKind::kSeg) {
        io::SegWriteOptions so;
        so.type = options.seg_type;
        so.algorithm_name = options.algorithm_name;
        so.algorithm_version = options.algorithm_version;
        so.series_description = options.series_description.empty()
                                    ? options.algorithm_name + " segmentation"
                                    : options.series_description;
        return io::writeDicomSeg(labels, series, segments, so, path).status();
    }
    io::RtStructWriteOptions ro;
    ro.algorithm_name = options.algorithm_name + " " + options.algorithm_version;
    ro.series_description = options.series_description.empty()
                                ? options.algorithm_name + " structures"
                                : options.series_description;
    ro.structure_set_name = options.algorithm_name;
    ro.threads = options.threads;
    return io::writeRtStruct(labels, series, segments, ro, path).status();
}

Status writeDicomSegmentation(DicomSegmentationKind kind, const Volume& label_map,
                              const io::SeriesCandidate& series,
                              const std::vector<io::SegmentDescription>& segments,
                              const DicomSegmentationOptions& options, const std::string& path) {
    auto acquired = io::labelsOnAcquiredImages(label_map, series, options.threads);
    if (!acquired.isOk()) return acquired.status().withContext(path + ": ");
    return writeDicomSegmentation(kind, *acquired, series, segments, options, path);
}

namespace {

// Why `name` cannot be a file name as it is; empty when it can.
std::string unsafeFileNameReason(const std::string& name) {
    if (name.empty()) return "it is empty";
    if (name == "." || name == "..") return "it names a folder";
    if (name.size() > 248) return "it is longer than 248 bytes";
    for (const char c : name) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '/' || c == '\\') return fmt::format("it holds '{}'", c);
        if (u < 0x20 || u == 0x7f) return fmt::format("it holds the control character 0x{:02x}", u);
    }
    return "";
}

}  // namespace

Status checkMaskFileNames(const std::vector<LabelInfo>& labels) {
    std::map<std::string, std::string> folded;  // lower case -> name
    for (const LabelInfo& l : labels) {
        const std::string why = unsafeFileNameReason(l.name);
        if (!why.empty())
            return invalidArgument(
                fmt::format("label {} \"{}\" cannot name its mask file "
                            "masks/<name>.nii.gz: {}; rename the label in "
                            "model.json or drop 'masks' from --outputs",
                            l.value, l.name, why));
        std::string lower = l.name;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        const auto [it, inserted] = folded.emplace(lower, l.name);
        if (!inserted)
            return invalidArgument(fmt::format(
                "labels \"{}\" and \"{}\" differ only in letter case: their mask files would "
                "be one file on case-insensitive file systems; rename one in model.json or drop "
                "'masks' from --outputs",
                it->second, l.name));
    }
    return Status::ok();
}

std::string maskFilePath(const LabelInfo& label) { return "masks/" + label.name + ".nii.gz"; }

Status writeLabelMasks(const Volume& label_map, const std::vector<LabelInfo>& labels,
                       const std::vector<std::string>& paths, const Progress& progress) {
    if (labels.size() != paths.size())
        return invalidArgument("writeLabelMasks: one path per label is needed");
    if (!isLabelPixelType(label_map.pixelType()))
        return invalidArgument(std::string("masks need a uint8/uint16 label map, not ") +
                               pixelTypeName(label_map.pixelType()));
    const Geometry g = label_map.geometry();
    Volume mask = Volume::allocateUninitialized<uint8_t>(g);  // reused: one mask at a time
    uint8_t* out = mask.data<uint8_t>();
    const auto n = static_cast<size_t>(g.voxelCount());
    for (size_t m = 0; m < labels.size(); ++m) {
        VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
        const int value = labels[m].value;
        withPixelType(label_map.pixelType(), [&](auto tag) {
            using L = decltype(tag);
            if constexpr (std::is_same_v<L, uint8_t> || std::is_same_v<L, uint16_t>) {
                const L* in = label_map.data<L>();
                for (size_t i = 0; i < n; ++i) out[i] = static_cast<int>(in[i]) == value ? 1 : 0;
            }
        });
        VOXSEG_RETURN_IF_ERROR(io::writeImage(mask, paths[m]));
    }
    return Status::ok();
}

}  // namespace voxseg::pipeline
