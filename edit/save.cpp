#include "edit/save.h"

#include "io/image_io.h"
#include "pipeline/segmentation_files.h"

#include <algorithm>
#include <cctype>

namespace voxseg::edit {

Result<OutputKind> outputKindFor(const std::string& path) {
    std::string lower = path;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower.size() >= 4 && lower.compare(lower.size() - 4, 4, ".dcm") == 0)
        return OutputKind::kDicomSeg;
    if (io::imageFormatFromPath(path) != io::ImageFormat::kUnknown) return OutputKind::kLabelMap;
    return invalidArgument(
        "output must be a label map file (.nii.gz, .nii, .nrrd, .mha) or a .dcm DICOM SEG", path);
}

Status saveEditedSegmentation(const Volume& label_map, const std::string& path,
                              const io::SeriesCandidate* series,
                              const std::vector<io::SegmentDescription>& segments,
                              const SaveOptions& options) {
    VOXSEG_ASSIGN_OR_RETURN(const OutputKind kind, outputKindFor(path));
    if (kind == OutputKind::kLabelMap) return io::writeImage(label_map, path);
    if (!series)
        return invalidArgument(
            "a DICOM SEG output needs a DICOM image input (the SEG references its source "
            "images); write a label map instead",
            path);
    pipeline::DicomSegmentationOptions so;
    so.algorithm_name = options.algorithm_name;
    so.algorithm_version = options.algorithm_version;
    so.series_description = options.series_description;
    so.seg_type = options.seg_type;
    so.threads = options.threads;
    std::vector<io::SegmentDescription> described = segments;
    for (const LabelChange& change : options.changes) {
        auto it = std::find_if(described.begin(), described.end(),
                               [&](const auto& d) { return d.value == change.label; });
        if (it == described.end()) {  // drawn by hand: no description came with it
            it = described.insert(described.end(),
                                  io::SegmentDescription{undescribedLabel(change.label)});
        }
        it->algorithm_type = change.algorithmTypeAfter(it->algorithm_type);
    }
    return pipeline::writeDicomSegmentation(pipeline::DicomSegmentationKind::kSeg, label_map,
                                            *series, described, so, path);
}

}  // namespace voxseg::edit
