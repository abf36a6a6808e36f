#include "pipeline/segmentation_files.h"

#include "io/acquired_labels.h"
#include "io/image_io.h"
#include "io/rtstruct_reader.h"
#include "io/rtstruct_writer.h"
#include "io/seg_reader.h"

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

}  // namespace voxseg::pipeline
