// EditOp: one edit of a label map, as the viewer, `voxseg edit` and the tests record it: one JSON
// object on one line of an edit journal (edit/journal.h; format in docs/edit-journal.md).
// Coordinates are patient LPS millimetres (core/geometry.h), never voxel indices, so a journal
// replays onto any loading of the same image (a resampled tilted series included). A voxel belongs
// to a shape when its centre does.
//
// Parsing is strict: an unknown key, a missing key or a value of the wrong type or range is an
// error naming the key. Plain value type; thread-compatible.
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "edit/recorded_object.h"

#include <optional>
#include <string>
#include <vector>

namespace voxseg::edit {

enum class OpKind {
    kPaint,
    kErase,
    kThreshold,
    kFloodFill,
    kLevelTrace,
    kFillBetweenSlices,
    kIslands,
    kMedian,
    kOpening,
    kClosing,
    kMargin,
    kLogical,
    kUndo,
    kRedo,
    // Prompts of an interactive (nnInteractive-style) session (edit/interactive/prompt_ops.h):
    // they change the session's current object, not the label map, except kPromptAccept, which
    // writes the object into `label`. Applied by InteractiveEditor, never by LabelEditor alone.
    kPromptPoint,
    kPromptBox,
    kPromptScribble,
    kPromptLasso,
    kPromptInitialSeg,
    kPromptReset,
    kPromptAccept,
    // The session's settings from this op on (the model, its precision, AutoZoom): what the
    // viewer ran, so a replay runs the same. Not an undo step.
    kPromptSession,
};
// True for the kPrompt* kinds.
bool isPromptOp(OpKind kind);
enum class Shape { kSphere, kDisk };
// A patient plane; an edit "in the axial plane" acts on the slice of the image grid whose index
// axis is closest to the plane's normal (edit/grid_planes.h).
enum class Plane { kAxial, kCoronal, kSagittal };
enum class IslandMode { kKeepLargest, kRemoveSmall, kSplit };
enum class LogicalOp { kUnion, kIntersect, kSubtract, kCopy, kClear };

// Which voxels an edit that adds `label` may change (3D Slicer's Segment Editor masking):
// kAll: any voxel; kBackground: only background (0); kLabel: only voxels of `label`.
// Voxels already holding the painted label are never changed, whatever the policy.
struct Overwrite {
    enum class Mode { kAll, kBackground, kLabel } mode = Mode::kAll;
    int label = 0;
    bool operator==(const Overwrite&) const = default;
};

struct EditOp {
    OpKind kind = OpKind::kPaint;
    // paint / erase
    Shape shape = Shape::kSphere;
    Plane plane = Plane::kAxial;  // disk, fill_between_slices, and threshold/flood in a slice
    bool in_slice = false;        // threshold / flood_fill: only in the slice through `points[0]`
    std::vector<Vec3> points;     // center_mm (1 point), stroke_mm (polyline), seed_mm, point_mm;
                                  // prompts: point_mm, corners_mm (2), stroke_mm, lasso_mm
    bool stroke = false;          // written as stroke_mm (even with one point)
    double radius_mm = 0.0;       // paint/erase, median, opening, closing
    int label = 0;                // 0 for erase: every label
    std::optional<double> min;    // intensity range of the image (inclusive)
    std::optional<double> max;
    Overwrite overwrite;
    int connectivity = 6;  // flood_fill 6 | 26 (default 6); islands default 26
    IslandMode island_mode = IslandMode::kKeepLargest;
    double min_ml = 0.0;     // islands remove_small
    double margin_mm = 0.0;  // margin: > 0 grows, < 0 shrinks
    LogicalOp logical = LogicalOp::kUnion;
    int other = 0;  // logical: the second label
    // prompts
    bool include = true;          // point, box, scribble, lasso: object (true) or background
    std::string mask;             // initial_seg: a mask file (nonzero = in) instead of `label`
    bool run_prediction = false;  // initial_seg: let the model refine it (2.6.0's default: no)
    // accept: the object as the reviewer accepted it (absent: only a rerun of the prompts
    // with the model can write it)
    std::optional<RecordedObject> object;
    // prompt_session
    std::string model;           // the package's "name version"
    std::string network_sha256;  // its network file (empty: not recorded)
    std::string precision;       // "fp32", "bf16", ... (engine::parsePrecision's names)
    bool autozoom = true;
    // A new session from here (the viewer loaded the model, or began or restored a journal): the
    // object and its prompts are cleared, and older prompts can no longer be undone in it.
    bool restart = false;

    bool operator==(const EditOp&) const = default;
};

const char* opName(OpKind kind);  // "paint", "fill_between_slices", ...

// One JSON line (no newline), keys in a fixed order, doubles written to round-trip exactly.
std::string toJsonLine(const EditOp& op);
// Parses one line. Errors are kInvalidArgument naming the key ("key \"radius_mm\": ...").
Result<EditOp> parseEditOp(const std::string& line);

}  // namespace voxseg::edit
