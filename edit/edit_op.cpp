#include "edit/edit_op.h"

#include "core/json_object.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <string_view>

namespace voxseg::edit {
namespace {

using Json = nlohmann::ordered_json;

struct Name {
    OpKind kind;
    const char* name;
};
constexpr Name kOpNames[] = {
    {OpKind::kPaint, "paint"},
    {OpKind::kErase, "erase"},
    {OpKind::kThreshold, "threshold"},
    {OpKind::kFloodFill, "flood_fill"},
    {OpKind::kLevelTrace, "level_trace"},
    {OpKind::kFillBetweenSlices, "fill_between_slices"},
    {OpKind::kIslands, "islands"},
    {OpKind::kMedian, "median"},
    {OpKind::kOpening, "opening"},
    {OpKind::kClosing, "closing"},
    {OpKind::kMargin, "margin"},
    {OpKind::kLogical, "logical"},
    {OpKind::kUndo, "undo"},
    {OpKind::kRedo, "redo"},
    {OpKind::kPromptPoint, "prompt_point"},
    {OpKind::kPromptBox, "prompt_box"},
    {OpKind::kPromptScribble, "prompt_scribble"},
    {OpKind::kPromptLasso, "prompt_lasso"},
    {OpKind::kPromptInitialSeg, "prompt_initial_seg"},
    {OpKind::kPromptReset, "prompt_reset"},
    {OpKind::kPromptAccept, "prompt_accept"},
    {OpKind::kPromptSession, "prompt_session"},
};

const char* planeName(Plane p) {
    switch (p) {
        case Plane::kAxial:
            return "axial";
        case Plane::kCoronal:
            return "coronal";
        case Plane::kSagittal:
            return "sagittal";
    }
    return "axial";
}
const char* islandModeName(IslandMode m) {
    switch (m) {
        case IslandMode::kKeepLargest:
            return "keep_largest";
        case IslandMode::kRemoveSmall:
            return "remove_small";
        case IslandMode::kSplit:
            return "split";
    }
    return "keep_largest";
}
const char* logicalName(LogicalOp l) {
    switch (l) {
        case LogicalOp::kUnion:
            return "union";
        case LogicalOp::kIntersect:
            return "intersect";
        case LogicalOp::kSubtract:
            return "subtract";
        case LogicalOp::kCopy:
            return "copy";
        case LogicalOp::kClear:
            return "clear";
    }
    return "union";
}
std::string overwriteName(const Overwrite& o) {
    switch (o.mode) {
        case Overwrite::Mode::kAll:
            return "all";
        case Overwrite::Mode::kBackground:
            return "background";
        case Overwrite::Mode::kLabel:
            return "label:" + std::to_string(o.label);
    }
    return "all";
}

Json point(const Vec3& p) { return Json::array({p[0], p[1], p[2]}); }

// Keys each op accepts.
std::vector<std::string_view> allowedKeys(const EditOp& op) {
    switch (op.kind) {
        case OpKind::kPaint:
        case OpKind::kErase:
            return {"op",        "shape", "plane", "center_mm", "stroke_mm",
                    "radius_mm", "label", "min",   "max",       "overwrite"};
        case OpKind::kThreshold:
            return {"op", "label", "min", "max", "overwrite", "plane", "point_mm"};
        case OpKind::kFloodFill:
            return {"op", "label", "seed_mm", "min", "max", "overwrite", "plane", "connectivity"};
        case OpKind::kLevelTrace:
            return {"op", "label", "seed_mm", "plane", "overwrite"};
        case OpKind::kFillBetweenSlices:
            return {"op", "label", "plane", "overwrite"};
        case OpKind::kIslands:
            return {"op", "label", "mode", "min_ml", "connectivity"};
        case OpKind::kMedian:
        case OpKind::kOpening:
        case OpKind::kClosing:
            return {"op", "label", "radius_mm", "overwrite"};
        case OpKind::kMargin:
            return {"op", "label", "margin_mm", "overwrite"};
        case OpKind::kLogical:
            return {"op", "operation", "label", "other"};
        case OpKind::kUndo:
        case OpKind::kRedo:
        case OpKind::kPromptReset:
            return {"op"};
        case OpKind::kPromptPoint:
            return {"op", "point_mm", "include"};
        case OpKind::kPromptBox:
            return {"op", "corners_mm", "include"};
        case OpKind::kPromptScribble:
            return {"op", "stroke_mm", "include"};
        case OpKind::kPromptLasso:
            return {"op", "lasso_mm", "include"};
        case OpKind::kPromptInitialSeg:
            return {"op", "label", "mask", "run_prediction"};
        case OpKind::kPromptAccept:
            return {"op", "label", "overwrite", "object"};
        case OpKind::kPromptSession:
            return {"op", "model", "network_sha256", "precision", "autozoom", "restart"};
    }
    return {"op"};
}

// The value checks of one op line beyond core/json_object.h's: points, labels, planes, the
// overwrite policy, the intensity range and the connectivity. Errors name the key
// ("key \"radius_mm\": ...").
class Parser {
  public:
    explicit Parser(JsonObject& o) : o_(o) {}

    Status error(const std::string& key, const std::string& what) const {
        return o_.error(key, what);
    }
    bool has(const std::string& key) const { return o_.has(key); }

    Status number(const std::string& key, double& out) const {
        VOXSEG_ASSIGN_OR_RETURN(out, o_.number(key, -kAny, kAny));
        return {};
    }
    Status positive(const std::string& key, double& out) const {
        VOXSEG_RETURN_IF_ERROR(length(key, out));
        if (!(out > 0)) return error(key, fmt::format("must be > 0 (got {})", out));
        return {};
    }
    Status integer(const std::string& key, int& out, int lo, int hi) const {
        VOXSEG_ASSIGN_OR_RETURN(const int64_t x, o_.integer(key, lo, hi));
        out = static_cast<int>(x);
        return {};
    }
    Status label(const std::string& key, int& out, int lo) const {
        return integer(key, out, lo, 65535);
    }
    Status point(const std::string& key, Vec3& out) const {
        const nlohmann::json* v = o_.value(key);
        if (!v) return error(key, "missing");
        if (!isPoint(*v))
            return error(key, "expected [x, y, z] in mm, got " + JsonDocument::shortDump(*v));
        out = {(*v)[0].get<double>(), (*v)[1].get<double>(), (*v)[2].get<double>()};
        return withinReach(key, out);
    }
    Status points(const std::string& key, std::vector<Vec3>& out) const {
        const nlohmann::json* v = o_.value(key);
        if (!v || !v->is_array() || v->empty())
            return error(key, "expected a non-empty list of [x, y, z] points in mm");
        for (const nlohmann::json& p : *v) {
            if (!isPoint(p))
                return error(key,
                             "expected [x, y, z] points in mm, got " + JsonDocument::shortDump(p));
            out.push_back({p[0].get<double>(), p[1].get<double>(), p[2].get<double>()});
            VOXSEG_RETURN_IF_ERROR(withinReach(key, out.back()));
        }
        return {};
    }
    // A length in mm (radius, margin) or a volume in ml: within +/-kReachMm, like positions.
    Status length(const std::string& key, double& out) const {
        VOXSEG_ASSIGN_OR_RETURN(out, o_.number(key, -kReachMm, kReachMm));
        return {};
    }
    Status boolean(const std::string& key, bool& out) const {
        const nlohmann::json* v = o_.value(key);
        if (!v) return error(key, "missing");
        if (!v->is_boolean()) return error(key, "expected true or false");
        out = v->get<bool>();
        return {};
    }
    Status string(const std::string& key, std::string& out) const {
        VOXSEG_ASSIGN_OR_RETURN(out, o_.string(key));
        return {};
    }
    Status plane(Plane& out) const {
        std::string s;
        VOXSEG_RETURN_IF_ERROR(string("plane", s));
        if (s == "axial")
            out = Plane::kAxial;
        else if (s == "coronal")
            out = Plane::kCoronal;
        else if (s == "sagittal")
            out = Plane::kSagittal;
        else
            return error("plane", "\"" + s + "\": expected axial, coronal or sagittal");
        return {};
    }
    Status overwrite(Overwrite& out) const {
        if (!has("overwrite")) return {};
        std::string s;
        VOXSEG_RETURN_IF_ERROR(string("overwrite", s));
        if (s == "all") {
            out = {Overwrite::Mode::kAll, 0};
        } else if (s == "background") {
            out = {Overwrite::Mode::kBackground, 0};
        } else if (s.rfind("label:", 0) == 0) {
            const std::string n = s.substr(6);
            if (n.empty() || n.size() > 5 ||
                n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1 ||
                std::stoi(n) > 65535)
                return error("overwrite", "\"" + s + "\": expected label:N with N in [1, 65535]");
            out = {Overwrite::Mode::kLabel, std::stoi(n)};
        } else {
            return error("overwrite", "\"" + s + "\": expected all, background or label:N");
        }
        return {};
    }
    Status range(EditOp& op, bool required) const {
        double v = 0;
        if (has("min")) {
            VOXSEG_RETURN_IF_ERROR(number("min", v));
            op.min = v;
        }
        if (has("max")) {
            VOXSEG_RETURN_IF_ERROR(number("max", v));
            op.max = v;
        }
        if (required && !op.min && !op.max) return error("min", "missing (give min, max or both)");
        if (op.min && op.max && *op.min > *op.max)
            return error("max", fmt::format("{} is below min {}", *op.max, *op.min));
        return {};
    }
    // prompt_accept's recorded object: {"size": [i, j, k], "first_mm", "last_mm", "runs"}.
    Status object(std::optional<RecordedObject>& out) const {
        const nlohmann::json* v = o_.value("object");
        const auto bad = [&](const std::string& what) { return error("object", what); };
        if (!v || !v->is_object()) return bad("expected {size, first_mm, last_mm, runs}");
        for (const auto& [key, value] : v->items())
            if (key != "size" && key != "first_mm" && key != "last_mm" && key != "runs")
                return bad("unknown key \"" + key + "\" (known: size, first_mm, last_mm, runs)");
        RecordedObject r;
        const auto counts = [](const nlohmann::json* a, size_t n, int64_t lo, int64_t hi) {
            if (!a || !a->is_array() || (n && a->size() != n)) return false;
            for (const nlohmann::json& x : *a)
                if (!x.is_number_integer() || x.get<int64_t>() < lo || x.get<int64_t>() > hi)
                    return false;
            return true;
        };
        const nlohmann::json* size = v->contains("size") ? &(*v)["size"] : nullptr;
        if (!counts(size, 3, 1, int64_t{1} << 20))
            return bad("size: expected [i, j, k] voxel counts in [1, 1048576]");
        for (int d = 0; d < 3; ++d) r.size[d] = (*size)[d].get<int64_t>();
        for (const char* key : {"first_mm", "last_mm"}) {
            const nlohmann::json* c = v->contains(key) ? &(*v)[key] : nullptr;
            if (!c || !isPoint(*c)) return bad(std::string(key) + ": expected [x, y, z] in mm");
            (std::string(key) == "first_mm" ? r.first_mm : r.last_mm) = {
                (*c)[0].get<double>(), (*c)[1].get<double>(), (*c)[2].get<double>()};
        }
        const nlohmann::json* runs = v->contains("runs") ? &(*v)["runs"] : nullptr;
        if (!counts(runs, 0, 0, std::numeric_limits<int64_t>::max()))
            return bad("runs: expected a list of run lengths >= 0");
        r.runs = runs->get<std::vector<int64_t>>();
        if (const auto covered = checkRuns(r); !covered.isOk())
            return bad(covered.status().message());
        out = std::move(r);
        return {};
    }
    Status connectivity(EditOp& op, int fallback) const {
        op.connectivity = fallback;
        if (!has("connectivity")) return {};
        VOXSEG_RETURN_IF_ERROR(integer("connectivity", op.connectivity, 6, 26));
        if (op.connectivity != 6 && op.connectivity != 26)
            return error("connectivity", fmt::format("must be 6 or 26 (got {})", op.connectivity));
        return {};
    }

  private:
    static bool isPoint(const nlohmann::json& p) {
        return p.is_array() && p.size() == 3 && p[0].is_number() && p[1].is_number() &&
               p[2].is_number();
    }
    // Patient coordinates and lengths beyond 1 km are damage, not anatomy: refused here so that
    // no op turns them into voxel indices (1e25 mm does not fit an int64 index).
    Status withinReach(const std::string& key, const Vec3& p) const {
        for (double c : p)
            if (!(std::abs(c) <= kReachMm))
                return error(key, fmt::format("{} mm is beyond +/-{:g} mm: not a patient position",
                                              c, kReachMm));
        return {};
    }
    static constexpr double kAny = std::numeric_limits<double>::max();
    static constexpr double kReachMm = 1e6;
    JsonObject& o_;
};

// paint and erase: a sphere or a disk in a plane, at one point or along a stroke.
Status parsePaintFields(const Parser& p, EditOp& op) {
    std::string shape;
    if (!p.has("shape")) return p.error("shape", "missing (sphere or disk)");
    VOXSEG_RETURN_IF_ERROR(p.string("shape", shape));
    if (shape == "sphere")
        op.shape = Shape::kSphere;
    else if (shape == "disk")
        op.shape = Shape::kDisk;
    else
        return p.error("shape", "\"" + shape + "\": expected sphere or disk");
    if (op.shape == Shape::kDisk) {
        if (!p.has("plane")) return p.error("plane", "missing (a disk needs its plane)");
        VOXSEG_RETURN_IF_ERROR(p.plane(op.plane));
    } else if (p.has("plane")) {
        return p.error("plane", "only for shape disk");
    }
    if (p.has("center_mm") == p.has("stroke_mm"))
        return p.error("center_mm", "give either center_mm or stroke_mm");
    if (p.has("center_mm")) {
        Vec3 c{};
        VOXSEG_RETURN_IF_ERROR(p.point("center_mm", c));
        op.points = {c};
    } else {
        op.stroke = true;
        VOXSEG_RETURN_IF_ERROR(p.points("stroke_mm", op.points));
    }
    if (!p.has("radius_mm")) return p.error("radius_mm", "missing");
    VOXSEG_RETURN_IF_ERROR(p.positive("radius_mm", op.radius_mm));
    if (op.kind == OpKind::kPaint) {
        VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
        VOXSEG_RETURN_IF_ERROR(p.overwrite(op.overwrite));
    } else {
        if (p.has("label")) VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
        if (p.has("overwrite")) return p.error("overwrite", "not for erase");
    }
    return p.range(op, false);
}

// islands: keep_largest, remove_small (min_ml) or split.
Status parseIslandFields(const Parser& p, EditOp& op) {
    VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
    std::string mode;
    if (!p.has("mode")) return p.error("mode", "missing (keep_largest, remove_small, split)");
    VOXSEG_RETURN_IF_ERROR(p.string("mode", mode));
    if (mode == "keep_largest")
        op.island_mode = IslandMode::kKeepLargest;
    else if (mode == "remove_small")
        op.island_mode = IslandMode::kRemoveSmall;
    else if (mode == "split")
        op.island_mode = IslandMode::kSplit;
    else
        return p.error("mode", "\"" + mode + "\": expected keep_largest, remove_small or split");
    if (op.island_mode == IslandMode::kRemoveSmall) {
        if (!p.has("min_ml")) return p.error("min_ml", "missing (remove_small needs it)");
        VOXSEG_RETURN_IF_ERROR(p.positive("min_ml", op.min_ml));
    } else if (p.has("min_ml")) {
        return p.error("min_ml", "only for mode remove_small");
    }
    return p.connectivity(op, 26);
}

// logical: union, intersect, subtract, copy (label and other) or clear (label).
Status parseLogicalFields(const Parser& p, EditOp& op) {
    std::string s;
    if (!p.has("operation"))
        return p.error("operation", "missing (union, intersect, subtract, copy, clear)");
    VOXSEG_RETURN_IF_ERROR(p.string("operation", s));
    if (s == "union")
        op.logical = LogicalOp::kUnion;
    else if (s == "intersect")
        op.logical = LogicalOp::kIntersect;
    else if (s == "subtract")
        op.logical = LogicalOp::kSubtract;
    else if (s == "copy")
        op.logical = LogicalOp::kCopy;
    else if (s == "clear")
        op.logical = LogicalOp::kClear;
    else
        return p.error("operation",
                       "\"" + s + "\": expected union, intersect, subtract, copy or clear");
    VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
    if (op.logical == LogicalOp::kClear) {
        if (p.has("other")) return p.error("other", "not for clear");
    } else {
        VOXSEG_RETURN_IF_ERROR(p.label("other", op.other, 1));
        if (op.other == op.label) return p.error("other", "must differ from label");
    }
    return {};
}

// The prompts of an interactive session: positions in patient mm, include (default true).
Status parsePromptFields(const Parser& p, EditOp& op) {
    if (p.has("include")) VOXSEG_RETURN_IF_ERROR(p.boolean("include", op.include));
    switch (op.kind) {
        case OpKind::kPromptPoint: {
            Vec3 c{};
            VOXSEG_RETURN_IF_ERROR(p.point("point_mm", c));
            op.points = {c};
            return {};
        }
        case OpKind::kPromptBox:
            VOXSEG_RETURN_IF_ERROR(p.points("corners_mm", op.points));
            if (op.points.size() != 2)
                return p.error("corners_mm",
                               fmt::format("expected 2 corners (got {})", op.points.size()));
            return {};
        case OpKind::kPromptScribble:
            return p.points("stroke_mm", op.points);
        case OpKind::kPromptLasso:
            VOXSEG_RETURN_IF_ERROR(p.points("lasso_mm", op.points));
            if (op.points.size() < 4)
                return p.error("lasso_mm",
                               fmt::format("a closed lasso needs at least 4 points, the last "
                                           "the first again (got {})",
                                           op.points.size()));
            return {};
        case OpKind::kPromptInitialSeg:
            if (p.has("label") == p.has("mask"))
                return p.error("label", "give either label (of the label map) or mask (a file)");
            if (p.has("label")) VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
            if (p.has("mask")) {
                VOXSEG_RETURN_IF_ERROR(p.string("mask", op.mask));
                if (op.mask.empty()) return p.error("mask", "empty file name");
            }
            if (p.has("run_prediction"))
                VOXSEG_RETURN_IF_ERROR(p.boolean("run_prediction", op.run_prediction));
            return {};
        case OpKind::kPromptAccept:
            VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
            VOXSEG_RETURN_IF_ERROR(p.overwrite(op.overwrite));
            if (p.has("object")) VOXSEG_RETURN_IF_ERROR(p.object(op.object));
            return {};
        case OpKind::kPromptSession:
            VOXSEG_RETURN_IF_ERROR(p.string("model", op.model));
            if (p.has("network_sha256"))
                VOXSEG_RETURN_IF_ERROR(p.string("network_sha256", op.network_sha256));
            VOXSEG_RETURN_IF_ERROR(p.string("precision", op.precision));
            if (op.precision.empty()) return p.error("precision", "empty (fp32, bf16, ...)");
            VOXSEG_RETURN_IF_ERROR(p.boolean("autozoom", op.autozoom));
            if (p.has("restart")) VOXSEG_RETURN_IF_ERROR(p.boolean("restart", op.restart));
            return {};
        default:
            return {};
    }
}

Status parseFields(const Parser& p, EditOp& op) {
    if (isPromptOp(op.kind)) return parsePromptFields(p, op);
    switch (op.kind) {
        case OpKind::kPaint:
        case OpKind::kErase:
            return parsePaintFields(p, op);
        case OpKind::kThreshold:
            VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
            VOXSEG_RETURN_IF_ERROR(p.range(op, true));
            VOXSEG_RETURN_IF_ERROR(p.overwrite(op.overwrite));
            if (p.has("plane") != p.has("point_mm"))
                return p.error(p.has("plane") ? "point_mm" : "plane",
                               "missing (a threshold in one slice needs plane and point_mm)");
            if (p.has("plane")) {
                op.in_slice = true;
                VOXSEG_RETURN_IF_ERROR(p.plane(op.plane));
                Vec3 c{};
                VOXSEG_RETURN_IF_ERROR(p.point("point_mm", c));
                op.points = {c};
            }
            return {};
        case OpKind::kFloodFill: {
            VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
            if (!p.has("seed_mm")) return p.error("seed_mm", "missing");
            Vec3 c{};
            VOXSEG_RETURN_IF_ERROR(p.point("seed_mm", c));
            op.points = {c};
            VOXSEG_RETURN_IF_ERROR(p.range(op, true));
            VOXSEG_RETURN_IF_ERROR(p.overwrite(op.overwrite));
            if (p.has("plane")) {
                op.in_slice = true;
                VOXSEG_RETURN_IF_ERROR(p.plane(op.plane));
            }
            return p.connectivity(op, 6);
        }
        case OpKind::kLevelTrace: {
            VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
            if (!p.has("seed_mm")) return p.error("seed_mm", "missing");
            Vec3 c{};
            VOXSEG_RETURN_IF_ERROR(p.point("seed_mm", c));
            op.points = {c};
            if (!p.has("plane")) return p.error("plane", "missing");
            op.in_slice = true;
            VOXSEG_RETURN_IF_ERROR(p.plane(op.plane));
            return p.overwrite(op.overwrite);
        }
        case OpKind::kFillBetweenSlices:
            VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
            if (!p.has("plane")) return p.error("plane", "missing");
            VOXSEG_RETURN_IF_ERROR(p.plane(op.plane));
            return p.overwrite(op.overwrite);
        case OpKind::kIslands:
            return parseIslandFields(p, op);
        case OpKind::kMedian:
        case OpKind::kOpening:
        case OpKind::kClosing:
            VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
            if (!p.has("radius_mm")) return p.error("radius_mm", "missing");
            VOXSEG_RETURN_IF_ERROR(p.positive("radius_mm", op.radius_mm));
            return p.overwrite(op.overwrite);
        case OpKind::kMargin:
            VOXSEG_RETURN_IF_ERROR(p.label("label", op.label, 1));
            if (!p.has("margin_mm")) return p.error("margin_mm", "missing");
            VOXSEG_RETURN_IF_ERROR(p.length("margin_mm", op.margin_mm));
            if (op.margin_mm == 0) return p.error("margin_mm", "must not be 0");
            return p.overwrite(op.overwrite);
        case OpKind::kLogical:
            return parseLogicalFields(p, op);
        default:  // undo, redo; prompts above
            return {};
    }
    return {};
}

}  // namespace

bool isPromptOp(OpKind kind) {
    return kind >= OpKind::kPromptPoint && kind <= OpKind::kPromptSession;
}

const char* opName(OpKind kind) {
    for (const Name& n : kOpNames)
        if (n.kind == kind) return n.name;
    return "?";
}

std::string toJsonLine(const EditOp& op) {
    Json j;
    j["op"] = opName(op.kind);
    const bool adds = op.kind != OpKind::kErase && op.kind != OpKind::kIslands &&
                      op.kind != OpKind::kLogical && op.kind != OpKind::kUndo &&
                      op.kind != OpKind::kRedo &&
                      (!isPromptOp(op.kind) || op.kind == OpKind::kPromptAccept);
    // prompt_accept's object goes last (after overwrite): the one long value of a line.
    Json object;
    auto points = [&](const char* key) {
        Json s = Json::array();
        for (const Vec3& p : op.points) s.push_back(point(p));
        j[key] = s;
    };
    auto range = [&] {
        if (op.min) j["min"] = *op.min;
        if (op.max) j["max"] = *op.max;
    };
    switch (op.kind) {
        case OpKind::kPaint:
        case OpKind::kErase:
            j["shape"] = op.shape == Shape::kSphere ? "sphere" : "disk";
            if (op.shape == Shape::kDisk) j["plane"] = planeName(op.plane);
            if (op.stroke) {
                Json s = Json::array();
                for (const Vec3& p : op.points) s.push_back(point(p));
                j["stroke_mm"] = s;
            } else {
                j["center_mm"] = point(op.points.at(0));
            }
            j["radius_mm"] = op.radius_mm;
            if (op.kind == OpKind::kPaint || op.label != 0) j["label"] = op.label;
            range();
            break;
        case OpKind::kThreshold:
            j["label"] = op.label;
            range();
            if (op.in_slice) {
                j["plane"] = planeName(op.plane);
                j["point_mm"] = point(op.points.at(0));
            }
            break;
        case OpKind::kFloodFill:
            j["label"] = op.label;
            j["seed_mm"] = point(op.points.at(0));
            range();
            if (op.in_slice) j["plane"] = planeName(op.plane);
            j["connectivity"] = op.connectivity;
            break;
        case OpKind::kLevelTrace:
            j["label"] = op.label;
            j["seed_mm"] = point(op.points.at(0));
            j["plane"] = planeName(op.plane);
            break;
        case OpKind::kFillBetweenSlices:
            j["label"] = op.label;
            j["plane"] = planeName(op.plane);
            break;
        case OpKind::kIslands:
            j["label"] = op.label;
            j["mode"] = islandModeName(op.island_mode);
            if (op.island_mode == IslandMode::kRemoveSmall) j["min_ml"] = op.min_ml;
            j["connectivity"] = op.connectivity;
            break;
        case OpKind::kMedian:
        case OpKind::kOpening:
        case OpKind::kClosing:
            j["label"] = op.label;
            j["radius_mm"] = op.radius_mm;
            break;
        case OpKind::kMargin:
            j["label"] = op.label;
            j["margin_mm"] = op.margin_mm;
            break;
        case OpKind::kLogical:
            j["operation"] = logicalName(op.logical);
            j["label"] = op.label;
            if (op.logical != LogicalOp::kClear) j["other"] = op.other;
            break;
        case OpKind::kUndo:
        case OpKind::kRedo:
        case OpKind::kPromptReset:
            break;
        case OpKind::kPromptPoint:
            j["point_mm"] = point(op.points.at(0));
            j["include"] = op.include;
            break;
        case OpKind::kPromptBox:
            points("corners_mm");
            j["include"] = op.include;
            break;
        case OpKind::kPromptScribble:
            points("stroke_mm");
            j["include"] = op.include;
            break;
        case OpKind::kPromptLasso:
            points("lasso_mm");
            j["include"] = op.include;
            break;
        case OpKind::kPromptInitialSeg:
            if (op.mask.empty())
                j["label"] = op.label;
            else
                j["mask"] = op.mask;
            j["run_prediction"] = op.run_prediction;
            break;
        case OpKind::kPromptAccept:
            j["label"] = op.label;
            if (op.object)
                object = {{"size", op.object->size},
                          {"first_mm", point(op.object->first_mm)},
                          {"last_mm", point(op.object->last_mm)},
                          {"runs", op.object->runs}};
            break;
        case OpKind::kPromptSession:
            j["model"] = op.model;
            if (!op.network_sha256.empty()) j["network_sha256"] = op.network_sha256;
            j["precision"] = op.precision;
            j["autozoom"] = op.autozoom;
            if (op.restart) j["restart"] = true;
            break;
    }
    if (adds) j["overwrite"] = overwriteName(op.overwrite);
    if (!object.is_null()) j["object"] = std::move(object);
    return j.dump();
}

Result<EditOp> parseEditOp(const std::string& line) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range.406 (1e999)
        return invalidArgument(std::string("not JSON: ") + e.what());
    }
    VOXSEG_ASSIGN_OR_RETURN(JsonObject o, JsonObject::wrap(j, "", {.quote = '"'}));
    VOXSEG_ASSIGN_OR_RETURN(const std::string name, o.string("op"));
    EditOp op;
    bool known = false;
    for (const Name& n : kOpNames) {
        if (name == n.name) {
            op.kind = n.kind;
            known = true;
        }
    }
    if (!known) {
        std::string names;
        for (const Name& n : kOpNames) names += std::string(names.empty() ? "" : ", ") + n.name;
        return o.error("op", "unknown op \"" + name + "\" (known: " + names + ")");
    }
    VOXSEG_RETURN_IF_ERROR(o.onlyKeys(allowedKeys(op)));
    VOXSEG_RETURN_IF_ERROR(parseFields(Parser(o), op));
    return op;
}

}  // namespace voxseg::edit
