#include "io/dicom_enhanced.h"

#include "io/dicom_tags.h"

#include <cmath>

namespace voxseg::io {

namespace {

Vec3 normalized(const Vec3& v) {
    double n = norm(v);
    return n > 0 ? Vec3{v[0] / n, v[1] / n, v[2] / n} : v;
}

// Applies the functional group macros present in `group` (a Shared or Per-Frame item) to `f`.
void applyGroup(DcmItem* group, FrameHeader& f, bool& has_position, bool& has_orientation) {
    if (!group) return;
    if (DcmItem* pos = tags::getItem(group, DCM_PlanePositionSequence)) {
        std::vector<double> ipp = tags::getDoubles(pos, DCM_ImagePositionPatient);
        if (ipp.size() == 3) {
            f.position = {ipp[0], ipp[1], ipp[2]};
            has_position = true;
        }
    }
    if (DcmItem* ori = tags::getItem(group, DCM_PlaneOrientationSequence)) {
        std::vector<double> iop = tags::getDoubles(ori, DCM_ImageOrientationPatient);
        if (iop.size() == 6) {
            f.row_dir = normalized({iop[0], iop[1], iop[2]});
            f.col_dir = normalized({iop[3], iop[4], iop[5]});
            has_orientation = true;
        }
    }
    if (DcmItem* measures = tags::getItem(group, DCM_PixelMeasuresSequence)) {
        std::vector<double> ps = tags::getDoubles(measures, DCM_PixelSpacing);
        if (ps.size() == 2 && ps[0] > 0 && ps[1] > 0) {
            f.row_spacing = ps[0];
            f.column_spacing = ps[1];
            f.has_pixel_spacing = true;
        }
        double t = tags::getDouble(measures, DCM_SliceThickness, 0, kUnset);
        if (t > 0) f.slice_thickness = t;
        double s = tags::getDouble(measures, DCM_SpacingBetweenSlices, 0, kUnset);
        if (s > 0) f.spacing_between_slices = s;
    }
    if (DcmItem* pvt = tags::getItem(group, DCM_PixelValueTransformationSequence)) {
        double slope = tags::getDouble(pvt, DCM_RescaleSlope, 0, f.slope);
        if (slope != 0 && std::isfinite(slope)) f.slope = slope;
        double intercept = tags::getDouble(pvt, DCM_RescaleIntercept, 0, f.intercept);
        if (std::isfinite(intercept)) f.intercept = intercept;
    }
    if (DcmItem* content = tags::getItem(group, DCM_FrameContentSequence)) {
        std::string stack = tags::getString(content, DCM_StackID);
        if (!stack.empty()) f.stack_id = stack;
        f.in_stack_position = tags::getInt(content, DCM_InStackPositionNumber, f.in_stack_position);
        f.temporal_position = tags::getInt(content, DCM_TemporalPositionIndex, f.temporal_position);
    }
    if (DcmItem* echo = tags::getItem(group, DCM_MREchoSequence)) {
        double te = tags::getDouble(echo, DCM_EffectiveEchoTime, 0, kUnset);
        if (std::isfinite(te)) f.echo_time = te;
    }
    for (const DcmTagKey& seq : {DCM_MRImageFrameTypeSequence, DCM_CTImageFrameTypeSequence}) {
        if (DcmItem* type = tags::getItem(group, seq)) {
            std::string frame_type = tags::getString(type, DCM_FrameType);
            if (!frame_type.empty()) f.image_type = frame_type;
        }
    }
    if (DcmItem* cardiac = tags::getItem(group, DCM_CardiacSynchronizationSequence)) {
        double delay = tags::getDouble(cardiac, DCM_NominalCardiacTriggerDelayTime, 0, kUnset);
        if (std::isfinite(delay)) f.trigger_time = delay;
    }
    // Philips keeps its MR scale slope in a private per-frame item.
    DcmTagKey philips_seq = tags::privateTag(group, 0x2005, "Philips MR Imaging DD 005", 0x0F);
    if (DcmItem* philips = tags::getItem(group, philips_seq)) {
        DcmTagKey slope_tag = tags::privateTag(philips, 0x2005, "Philips MR Imaging DD 001", 0x0E);
        Float32 v = 0;
        if (slope_tag.getGroup() != 0 && philips->findAndGetFloat32(slope_tag, v).good() &&
            v != 0 && std::isfinite(v))
            f.philips_scale_slope = v;
    }
}

}  // namespace

std::vector<FrameHeader> expandMultiFrame(DcmDataset* ds, const FrameHeader& base, int num_frames,
                                          std::string& error) {
    std::vector<FrameHeader> frames;
    DcmItem* shared = tags::getItem(ds, DCM_SharedFunctionalGroupsSequence);
    DcmSequenceOfItems* per_frame = nullptr;
    ds->findAndGetSequence(DCM_PerFrameFunctionalGroupsSequence, per_frame);
    if (shared || per_frame) {
        if (per_frame && per_frame->card() != static_cast<unsigned long>(num_frames)) {
            error = "enhanced multi-frame object lists " + std::to_string(per_frame->card()) +
                    " per-frame functional groups for " + std::to_string(num_frames) + " frames";
            return {};
        }
        for (int i = 0; i < num_frames; ++i) {
            FrameHeader f = base;
            f.frame = i;
            bool has_position = base.has_geometry;
            bool has_orientation = base.has_geometry;
            applyGroup(shared, f, has_position, has_orientation);
            if (per_frame) applyGroup(per_frame->getItem(i), f, has_position, has_orientation);
            f.has_geometry =
                has_position && has_orientation && norm(cross(f.row_dir, f.col_dir)) > 0.5;
            frames.push_back(std::move(f));
        }
        return frames;
    }
    // Legacy multi-frame: frames are consecutive slices starting at ImagePositionPatient.
    double step = std::isfinite(base.spacing_between_slices) ? base.spacing_between_slices
                  : std::isfinite(base.slice_thickness)      ? base.slice_thickness
                                                             : 1.0;
    Vec3 normal = normalized(cross(base.row_dir, base.col_dir));
    for (int i = 0; i < num_frames; ++i) {
        FrameHeader f = base;
        f.frame = i;
        for (int a = 0; a < 3; ++a) f.position[a] = base.position[a] + i * step * normal[a];
        f.in_stack_position = i + 1;
        frames.push_back(std::move(f));
    }
    return frames;
}

}  // namespace voxseg::io
