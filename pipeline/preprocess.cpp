#include "pipeline/preprocess.h"

#include "core/log.h"
#include "pipeline/resample.h"

namespace voxseg::pipeline {

Result<Preprocessed> preprocess(const std::vector<Volume>& channels, const PreprocessSpec& spec,
                                const Progress& progress) {
    if (channels.empty()) return invalidArgument("pre-processing: no input channels");
    if (spec.channels.size() != channels.size())
        return invalidArgument("the model expects " + std::to_string(spec.channels.size()) +
                               " input channel(s) but " + std::to_string(channels.size()) +
                               " were given");
    Preprocessed result;
    PreprocessRecord& record = result.record;
    record.original = channels[0].geometry();
    record.axis_order = spec.axis_order;

    std::vector<Volume> work;
    for (const Volume& c : channels) {
        if (c.empty() || !c.geometry().approxEqual(record.original))
            return invalidArgument("input channels must share one grid", c.info().source);
        VOXSEG_ASSIGN_OR_RETURN(Volume oriented,
                                reorient(c, spec.orientation, &record.orientation));
        work.push_back(std::move(oriented));
    }
    record.oriented = work[0].geometry();
    VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());

    record.crop.size = record.oriented.size;
    Volume mask;
    if (spec.crop_nonzero) {
        VOXSEG_ASSIGN_OR_RETURN(record.crop, nonzeroBox(work));
    }
    bool need_mask = false;
    for (const Normalization& n : spec.channels)
        need_mask |= n.scheme == Normalization::Scheme::kZScore && n.nonzero_mask;
    if (need_mask) {
        VOXSEG_ASSIGN_OR_RETURN(mask, nonzeroMask(work));
        VOXSEG_ASSIGN_OR_RETURN(mask, crop(mask, record.crop));
    }
    for (Volume& v : work) {
        VOXSEG_ASSIGN_OR_RETURN(v, crop(v, record.crop));
    }
    record.cropped = work[0].geometry();
    progress.report(0.2, "cropping");

    for (size_t c = 0; c < work.size(); ++c) {
        VOXSEG_ASSIGN_OR_RETURN(
            work[c], normalize(work[c], spec.channels[c], mask.empty() ? nullptr : &mask));
    }
    progress.report(0.4, "normalising");
    VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());

    const bool keep_spacing =
        spec.spacing_mm[0] == 0 && spec.spacing_mm[1] == 0 && spec.spacing_mm[2] == 0;
    record.network = record.cropped;
    if (!keep_spacing) {
        const Vec3 target = toIndexOrder(spec.spacing_mm, spec.axis_order);
        record.network = resampledGeometry(record.cropped, resampledSize(record.cropped, target));
        for (size_t c = 0; c < work.size(); ++c) {
            VOXSEG_ASSIGN_OR_RETURN(work[c],
                                    resampleToGrid(work[c], record.network, ResampleKind::kImage,
                                                   progress.sub(0.4 + 0.5 * c / work.size(),
                                                                0.4 + 0.5 * (c + 1) / work.size()),
                                                   spec.threads));
            VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
        }
    }
    log::debug("pipeline", "pre-processing: {}x{}x{} -> crop {}x{}x{} -> network grid {}x{}x{}",
               record.original.size[0], record.original.size[1], record.original.size[2],
               record.cropped.size[0], record.cropped.size[1], record.cropped.size[2],
               record.network.size[0], record.network.size[1], record.network.size[2]);
    VOXSEG_ASSIGN_OR_RETURN(result.input, volumesToTensor(work, spec.axis_order));
    progress.report(1.0, "pre-processing");
    return result;
}

}  // namespace voxseg::pipeline
