// The viewer's document: the loaded study (image + DICOM series), the label map shown over it
// with its label table, the linked cursor (crosshair) and the window/level. Every view observes
// one ViewerState through its signals; nothing here draws. Label statistics come from
// pipeline::computeStatistics, label names/colours from the model package (or pipeline::labels'
// palette for a plain label map), so the viewer shows exactly what `voxseg segment` writes.
//
// Ownership: holds the volumes (shared, reference-counted ITK images). Thread safety: GUI
// thread only; background work hands its results over through queued calls. Units: cursor in
// voxel indices (i, j, k) of the image; window in the image's units (HU for CT).
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "edit/label_editor.h"
#include "edit/segment_meta.h"
#include "io/seg_types.h"
#include "pipeline/labels.h"
#include "pipeline/segment.h"
#include "pipeline/statistics.h"
#include "ui/mpr_slice.h"

#include <QObject>
#include <QString>

#include <array>
#include <map>
#include <optional>
#include <vector>

namespace voxseg::ui {

// A row of the label table: the label (core/label_info.h), how it is shown, its size and the
// reviewer's status.
struct LabelEntry : LabelInfo {
    bool visible = true;
    double opacity = 0.5;
    int64_t voxels = 0;
    double volume_ml = 0.0;
    edit::ReviewStatus status = edit::ReviewStatus::kNotReviewed;
    // Edit provenance as loaded (SegmentAlgorithmType: AUTOMATIC, SEMIAUTOMATIC, MANUAL; empty:
    // unknown); saving an edited segmentation updates it from what the edits did.
    std::string algorithm_type;
    // The colour was given by the viewer (core/label_colors.h), not by a model, a file or the
    // reader: picking codes with a standard colour gives the label that colour.
    bool auto_color = false;
};

// A label map checked against an image and with its statistics computed: the slow part of
// showing a label map, done on a worker thread by prepareLabelMap(), then applied on the GUI
// thread.
struct PreparedLabelMap {
    Volume label_map;
    std::vector<LabelInfo> labels;
    std::vector<io::SegmentDescription> segments;
    pipeline::StatisticsReport statistics;
    LabelRuns runs;  // for the view whose slices cut across the stored rows (see LabelRuns)
};

// `label_map` must be on `image`'s grid (same size; origin, spacing and direction within
// 1e-3 mm / 1e-4). `labels` names and colours values (others found in the map get "label N" and
// the standard colour of their codes or a perceptually spaced palette colour, core/label_colors.h);
// `segments` (optional) describe them for DICOM SEG export. Float label maps are cast to int32.
// Thread-safe (plain function).
Result<PreparedLabelMap> prepareLabelMap(const Volume& image, Volume label_map,
                                         std::vector<LabelInfo> labels,
                                         std::vector<io::SegmentDescription> segments = {});

class ViewerState : public QObject {
    Q_OBJECT

  public:
    explicit ViewerState(QObject* parent = nullptr);

    // Replaces the image (and drops any label map); cursor to the centre, default window.
    void setStudy(pipeline::StudyInput study, const QString& source);
    bool hasImage() const { return !study_.volume.empty(); }
    const Volume& image() const { return study_.volume; }
    const pipeline::StudyInput& study() const { return study_; }
    const QString& source() const { return source_; }
    const SliceFrame& frame(ViewAxis view) const { return frames_[static_cast<int>(view)]; }

    // Shows a label map over the image (prepareLabelMap() + applyLabelMap(), on this thread).
    Status setLabelMap(Volume label_map, std::vector<LabelInfo> labels,
                       std::vector<io::SegmentDescription> segments = {});
    // Shows a prepared label map; it must have been prepared against the current image.
    void applyLabelMap(PreparedLabelMap prepared);
    void clearLabelMap();
    bool hasLabelMap() const { return !label_map_.empty(); }
    const Volume& labelMap() const { return label_map_; }
    const std::vector<LabelEntry>& labels() const { return entries_; }
    std::vector<LabelInfo> labelInfos() const;
    // The SEG segment descriptions from the table: names, colours, codes (from the model or
    // SEG when they came with it, else as picked), the review status in SegmentDescription.
    std::vector<io::SegmentDescription> segmentDescriptions() const;
    // The table as edit/segment_meta.h writes it (sidecars, recovery), and back: entries are
    // matched by value, missing ones added.
    std::vector<edit::SegmentMeta> segmentMetas() const;
    void applySegmentMetas(const std::vector<edit::SegmentMeta>& metas);

    // Label table edits (the voxels of a deleted label are cleared by the editor first).
    // addLabel: the lowest unused value (>= 1), a palette colour; returns its row.
    // setLabelCodes: a label whose colour the viewer chose takes the type's standard colour.
    size_t addLabel(const std::string& name);
    void renameLabel(size_t row, const std::string& name);
    void setLabelCodes(size_t row, const CodedConcept& category, const CodedConcept& type);
    void setLabelStatus(size_t row, edit::ReviewStatus status);
    void removeLabel(size_t row);
    // The row of a label value, or -1.
    int rowOfLabel(int value) const;

    // Editing (ui/edit_controller.h): `label_map` (uint8/uint16, the editor's own map, shared)
    // replaces the shown one, the table stays; an empty label map is made when none is shown.
    void beginEditing(const Volume& label_map);
    // After an edit changed voxels in place: the views redraw the box, the 3D view re-meshes
    // the labels, new label values get rows, statistics are recomputed later (refreshStatistics,
    // debounced by the caller).
    void labelVoxelsEdited(const edit::ApplyReport& report);
    // Recomputes statistics, voxel counts, bounds and the sagittal runs of the shown map.
    void refreshStatistics();
    // The same computed elsewhere (a worker thread, on a copy of the map) and applied here.
    struct LabelSummary {
        pipeline::StatisticsReport statistics;
        LabelRuns runs;
    };
    static Result<LabelSummary> summarizeLabels(const Volume& label_map, const Volume& image,
                                                const std::vector<LabelInfo>& labels);
    void applyLabelSummary(LabelSummary summary);
    const pipeline::StatisticsReport& statistics() const { return statistics_; }
    // A box around every labelled voxel (from the statistics), for drawing only that part.
    const IndexBox& labelBounds() const { return label_bounds_; }
    // A box around one label's voxels (from the statistics, grown by edits since; may be larger
    // than the label after erasing); empty when the label has none.
    IndexBox labelBox(int value) const;
    // The label map's runs for the slow (sagittal) view; nullptr when not built or turned off.
    const LabelRuns* labelRuns() const {
        return use_label_runs_ && !label_runs_.empty() ? &label_runs_ : nullptr;
    }
    // Draw from the volume instead of the runs (the bench compares both).
    void setUseLabelRuns(bool use) { use_label_runs_ = use; }

    void setLabelVisible(size_t row, bool visible);
    void setLabelOpacity(size_t row, double opacity);
    // The overlay, the 3D view and DICOM SEG export use the new colour.
    void setLabelColor(size_t row, std::array<uint8_t, 3> rgb);
    void setAllLabelsVisible(bool visible);
    const LabelColors& labelColors() const { return colors_; }
    OverlayMode overlayMode() const { return overlay_mode_; }
    void setOverlayMode(OverlayMode mode);

    std::array<int64_t, 3> cursor() const { return cursor_; }
    // Clamped to the grid; clears cursorOutside().
    void setCursor(std::array<int64_t, 3> voxel);
    // Linked crosshairs across series (ui/series_link.h): the shared patient point lies outside
    // this image and the cursor is the nearest voxel inside; the views hide the crosshair and
    // say so. Set after setCursor; emits cursorChanged when it changes.
    bool cursorOutside() const { return cursor_outside_; }
    void setCursorOutside(bool outside);
    int64_t slice(ViewAxis view) const { return cursor_[frame(view).axis_n]; }
    void setSlice(ViewAxis view, int64_t slice);
    void moveSlice(ViewAxis view, int64_t delta) { setSlice(view, slice(view) + delta); }

    WindowLevel window() const { return window_; }
    void setWindow(WindowLevel window);  // width clamped to > 0

    // Image value and label value at a voxel (0 outside or without labels).
    double imageValue(const std::array<int64_t, 3>& voxel) const;
    int labelValue(const std::array<int64_t, 3>& voxel) const;
    bool inside(const std::array<int64_t, 3>& voxel) const;
    // Name of a label value ("" for 0).
    std::string labelName(int value) const;
    // The colour a new label gets: the palette colour farthest from the shown labels' colours
    // (core/label_colors.h).
    std::array<uint8_t, 3> nextLabelColor() const;

    // Several series open (ui/series_area.h): swaps everything shown with `other` (study,
    // source, label map and table, overlay, window, cursor); both then emit every change signal
    // (an edit session on either ends, as for a new image).
    void swapDocument(ViewerState& other);
    // "CT  Abdomen 1.5  #3" of a DICOM series, else the file name of the source.
    QString title() const;

  signals:
    void imageChanged();
    void labelMapChanged();      // new or cleared label map (table rebuilt)
    void labelDisplayChanged();  // visibility, opacity, overlay mode
    void labelTableChanged();    // rows added/removed/renamed, codes, status, statistics
    // Voxels changed in place inside `box` (inclusive indices); `labels`: the values involved.
    void labelVoxelsChanged(const IndexBox& box, const std::vector<int>& labels);
    void cursorChanged();
    void windowChanged();

  private:
    void rebuildColors();
    void updateBounds();

    pipeline::StudyInput study_;
    QString source_;
    std::array<SliceFrame, 3> frames_{};
    Volume label_map_;
    std::vector<LabelEntry> entries_;
    std::vector<io::SegmentDescription> segments_;
    pipeline::StatisticsReport statistics_;
    IndexBox label_bounds_;
    std::map<int, IndexBox> label_boxes_;
    LabelRuns label_runs_;
    bool use_label_runs_ = true;
    LabelColors colors_;
    OverlayMode overlay_mode_ = OverlayMode::kFill;
    std::array<int64_t, 3> cursor_{0, 0, 0};
    bool cursor_outside_ = false;
    WindowLevel window_;
};

}  // namespace voxseg::ui
