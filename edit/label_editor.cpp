#include "edit/label_editor.h"

#include "edit/canvas.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

namespace voxseg::edit {
namespace detail {

Grid::Grid(const Geometry& g) : geometry(g), size(g.size), spacing(g.spacing), origin(g.origin) {
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) m[3 * r + c] = g.direction[3 * r + c] * g.spacing[c];
    m_inv = invert(m);
}

Vec3 Grid::index(const Vec3& p) const {
    return multiply(m_inv, {p[0] - origin[0], p[1] - origin[1], p[2] - origin[2]});
}

int Grid::sliceAxis(Plane plane) const {
    const int patient_axis = plane == Plane::kAxial ? 2 : plane == Plane::kCoronal ? 1 : 0;
    int best = 0;
    double best_cos = -1.0;
    for (int a = 0; a < 3; ++a) {
        const double c = std::abs(geometry.axisDirection(a)[patient_axis]);
        if (c > best_cos + 1e-12) {
            best_cos = c;
            best = a;
        }
    }
    return best;
}

Canvas::Canvas(const Volume& labels, std::vector<TileChange>& tiles) : tiles_out_(tiles) {
    wide_ = labels.pixelType() == PixelType::kUInt16;
    u8_ = labels.data<uint8_t>();
    u16_ = labels.data<uint16_t>();
    size_ = labels.geometry().size;
    for (int a = 0; a < 3; ++a)
        tiles_[a] = (size_[a] + LabelEditor::kTile - 1) / LabelEditor::kTile;
    slot_.assign(static_cast<size_t>(tiles_[0] * tiles_[1] * tiles_[2]), -1);
}

void Canvas::tileBox(int64_t tile, std::array<int64_t, 3>& lo, std::array<int64_t, 3>& hi) const {
    const int64_t t[3] = {tile % tiles_[0], (tile / tiles_[0]) % tiles_[1],
                          tile / (tiles_[0] * tiles_[1])};
    for (int a = 0; a < 3; ++a) {
        lo[a] = t[a] * LabelEditor::kTile;
        hi[a] = std::min(lo[a] + LabelEditor::kTile, size_[a]);
    }
}

void Canvas::readTile(int64_t tile, std::vector<uint8_t>& bytes) const {
    std::array<int64_t, 3> lo{}, hi{};
    tileBox(tile, lo, hi);
    const size_t bpv = wide_ ? 2 : 1;
    const size_t row = static_cast<size_t>(hi[0] - lo[0]) * bpv;
    bytes.resize(row * static_cast<size_t>((hi[1] - lo[1]) * (hi[2] - lo[2])));
    const uint8_t* base = wide_ ? reinterpret_cast<const uint8_t*>(u16_) : u8_;
    size_t o = 0;
    for (int64_t k = lo[2]; k < hi[2]; ++k)
        for (int64_t j = lo[1]; j < hi[1]; ++j, o += row)
            std::memcpy(bytes.data() + o, base + grid_linear(lo[0], j, k) * bpv, row);
}

void Canvas::writeTile(int64_t tile, const std::vector<uint8_t>& bytes) {
    std::array<int64_t, 3> lo{}, hi{};
    tileBox(tile, lo, hi);
    const size_t bpv = wide_ ? 2 : 1;
    const size_t row = static_cast<size_t>(hi[0] - lo[0]) * bpv;
    uint8_t* base = wide_ ? reinterpret_cast<uint8_t*>(u16_) : u8_;
    size_t o = 0;
    for (int64_t k = lo[2]; k < hi[2]; ++k)
        for (int64_t j = lo[1]; j < hi[1]; ++j, o += row)
            std::memcpy(base + grid_linear(lo[0], j, k) * bpv, bytes.data() + o, row);
}

void Canvas::touch(int64_t i, int64_t j, int64_t k) {
    const int64_t t = i / LabelEditor::kTile +
                      tiles_[0] * (j / LabelEditor::kTile + tiles_[1] * (k / LabelEditor::kTile));
    if (slot_[static_cast<size_t>(t)] >= 0) return;
    slot_[static_cast<size_t>(t)] = static_cast<int32_t>(tiles_out_.size());
    TileChange change;
    change.tile = t;
    readTile(t, change.before);
    tiles_out_.push_back(std::move(change));
}

}  // namespace detail

size_t UndoStep::bytes() const {
    size_t b = 0;
    for (const TileChange& t : tiles)
        b += t.before.size() + t.after.size() + t.offsets.size() * sizeof(uint32_t) +
             (t.sparse_before.size() + t.sparse_after.size()) * sizeof(uint16_t);
    return b;
}

LabelEditor::LabelEditor(LabelEditor&&) noexcept = default;
LabelEditor& LabelEditor::operator=(LabelEditor&&) noexcept = default;
LabelEditor::~LabelEditor() = default;

Result<LabelEditor> LabelEditor::create(const Volume& image, const Volume& label_map,
                                        const EditorOptions& options) {
    if (image.empty()) return invalidArgument("no image to edit a label map of");
    if (label_map.empty()) return invalidArgument("no label map to edit");
    if (label_map.pixelType() != PixelType::kUInt8 && label_map.pixelType() != PixelType::kUInt16)
        return unsupported(fmt::format("label map is {}: the editor takes uint8 or uint16",
                                       pixelTypeName(label_map.pixelType())),
                           label_map.info().source);
    const Geometry g = image.geometry();
    if (label_map.geometry().size != g.size || !label_map.geometry().approxEqual(g))
        return invalidArgument(
            "label map is not on the image's grid: read it onto the image first "
            "(pipeline::readSegmentationFile)",
            label_map.info().source);
    if (options.max_undo_steps < 1) return invalidArgument("max_undo_steps must be >= 1");
    LabelEditor e;
    e.image_ = image;
    e.labels_ = cloneVolume(label_map);
    e.geometry_ = g;
    e.options_ = options;
    return e;
}

size_t LabelEditor::historyBytes() const {
    size_t b = 0;
    for (const UndoStep& s : undo_) b += s.bytes();
    for (const UndoStep& s : redo_) b += s.bytes();
    return b;
}

bool LabelEditor::holdsStep(uint64_t id) const {
    for (const UndoStep& s : undo_)
        if (s.id == id) return true;
    for (const UndoStep& s : redo_)
        if (s.id == id) return true;
    return false;
}

void LabelEditor::push(UndoStep step) {
    step.id = next_id_++;
    redo_.clear();
    undo_.push_back(std::move(step));
    size_t bytes = historyBytes();
    while (undo_.size() > 1 && (static_cast<int>(undo_.size()) > options_.max_undo_steps ||
                                bytes > options_.max_undo_bytes)) {
        bytes -= undo_.front().bytes();
        undo_.pop_front();
    }
}

namespace {

uint16_t voxelAt(const std::vector<uint8_t>& bytes, size_t v, size_t bpv) {
    if (bpv == 1) return bytes[v];
    uint16_t x = 0;
    std::memcpy(&x, bytes.data() + 2 * v, 2);
    return x;
}

// Keeps only the changed voxels of a tile when they are few.
void sparsify(TileChange& t, size_t bpv) {
    const size_t n = t.before.size() / bpv;
    size_t changed = 0;
    for (size_t v = 0; v < n; ++v) changed += voxelAt(t.before, v, bpv) != voxelAt(t.after, v, bpv);
    if (changed * 8 >= n) return;
    for (size_t v = 0; v < n; ++v) {
        const uint16_t a = voxelAt(t.before, v, bpv), b = voxelAt(t.after, v, bpv);
        if (a == b) continue;
        t.offsets.push_back(static_cast<uint32_t>(v));
        t.sparse_before.push_back(a);
        t.sparse_after.push_back(b);
    }
    t.before = {};
    t.after = {};
}

// Fills report.box_lo/hi and report.labels from the tiles of `step`.
void describe(const UndoStep& step, const Geometry& g, size_t bpv, ApplyReport& report) {
    report.box_lo = {INT64_MAX, INT64_MAX, INT64_MAX};
    report.box_hi = {-1, -1, -1};
    std::array<int64_t, 3> tiles{};
    for (int a = 0; a < 3; ++a)
        tiles[a] = (g.size[a] + LabelEditor::kTile - 1) / LabelEditor::kTile;
    std::vector<bool> seen(bpv == 1 ? 256 : 65536, false);
    for (const TileChange& t : step.tiles) {
        const int64_t c[3] = {t.tile % tiles[0], (t.tile / tiles[0]) % tiles[1],
                              t.tile / (tiles[0] * tiles[1])};
        for (int a = 0; a < 3; ++a) {
            report.box_lo[a] = std::min(report.box_lo[a], c[a] * LabelEditor::kTile);
            report.box_hi[a] = std::max(report.box_hi[a],
                                        std::min(g.size[a], (c[a] + 1) * LabelEditor::kTile) - 1);
        }
        if (!t.offsets.empty()) {
            for (size_t n = 0; n < t.offsets.size(); ++n)
                seen[t.sparse_before[n]] = seen[t.sparse_after[n]] = true;
            continue;
        }
        const size_t voxels = t.before.size() / bpv;
        for (size_t v = 0; v < voxels; ++v) {
            const uint16_t a = voxelAt(t.before, v, bpv), b = voxelAt(t.after, v, bpv);
            if (a != b) seen[a] = seen[b] = true;
        }
    }
    if (step.tiles.empty()) report.box_lo = {0, 0, 0};
    report.labels.clear();
    for (size_t l = 0; l < seen.size(); ++l)
        if (seen[l]) report.labels.push_back(static_cast<int>(l));
}

size_t bytesPerVoxel(const Volume& labels) {
    return labels.pixelType() == PixelType::kUInt16 ? 2 : 1;
}

}  // namespace

Status LabelEditor::mergeLast(int n, const EditOp& op) {
    if (n < 1 || n > static_cast<int>(undo_.size()))
        return Status(StatusCode::kFailedPrecondition,
                      fmt::format("cannot merge the last {} steps: {} held", n, undo_.size()));
    const size_t bpv = bytesPerVoxel(labels_);
    const size_t first = undo_.size() - static_cast<size_t>(n);
    std::vector<TileChange> unused;
    detail::Canvas canvas(labels_, unused);
    std::map<int64_t, TileChange> merged;
    // Walk back from the newest step: a tile's "before" is rolled back step by step.
    for (size_t s = undo_.size(); s-- > first;) {
        for (const TileChange& t : undo_[s].tiles) {
            auto [it, added] = merged.try_emplace(t.tile);
            TileChange& m = it->second;
            if (added) {
                m.tile = t.tile;
                canvas.readTile(t.tile, m.after);
                m.before = m.after;
            }
            if (t.offsets.empty()) {
                m.before = t.before;
                continue;
            }
            for (size_t v = 0; v < t.offsets.size(); ++v) {
                if (bpv == 1)
                    m.before[t.offsets[v]] = static_cast<uint8_t>(t.sparse_before[v]);
                else
                    std::memcpy(m.before.data() + 2 * size_t{t.offsets[v]}, &t.sparse_before[v], 2);
            }
        }
    }
    UndoStep step;
    step.op = op;
    for (auto& [tile, t] : merged) {
        if (t.before == t.after) continue;
        sparsify(t, bpv);
        step.tiles.push_back(std::move(t));
    }
    undo_.erase(undo_.begin() + static_cast<std::ptrdiff_t>(first), undo_.end());
    step.id = next_id_++;
    undo_.push_back(std::move(step));
    return Status::ok();
}

Result<ApplyReport> LabelEditor::applyRecordedPrompt(const EditOp& op) {
    if (op.kind == OpKind::kPromptSession) {  // settings only: no step
        ApplyReport none;
        none.kind = op.kind;
        return none;
    }
    if (op.kind != OpKind::kPromptAccept)  // the session's part only: an empty step here
        return applyComputed(op, {0, 0, 0}, {-1, -1, -1}, [](int64_t, int v) { return v; });
    if (!op.object)
        return Status(StatusCode::kFailedPrecondition,
                      "prompt_accept: the line records no object, so only a rerun of the "
                      "prompts can write it: give the interactive model package (voxseg edit "
                      "--interactive-model)");
    auto mask = objectMask(*op.object, geometry_);
    if (!mask.isOk()) return mask.status().withContext("prompt_accept: ");
    std::array<int64_t, 3> lo{0, 0, 0}, hi{-1, -1, -1};
    const auto& size = geometry_.size;
    bool any = false;
    for (int64_t k = 0, index = 0; k < size[2]; ++k)
        for (int64_t j = 0; j < size[1]; ++j)
            for (int64_t i = 0; i < size[0]; ++i, ++index) {
                if (!(*mask)[static_cast<size_t>(index)]) continue;
                const std::array<int64_t, 3> v{i, j, k};
                for (int a = 0; a < 3; ++a) {
                    lo[a] = any ? std::min(lo[a], v[a]) : v[a];
                    hi[a] = any ? std::max(hi[a], v[a]) : v[a];
                }
                any = true;
            }
    const std::vector<uint8_t>& in = *mask;
    return applyComputed(op, lo, hi, [&](int64_t index, int current) {
        return in[static_cast<size_t>(index)] &&
                       detail::mayOverwrite(op.overwrite, current, op.label)
                   ? op.label
                   : current;
    });
}

Result<ApplyReport> LabelEditor::apply(const EditOp& op) {
    if (op.kind == OpKind::kUndo) return undo();
    if (op.kind == OpKind::kRedo) return redo();
    if (isPromptOp(op.kind)) return applyRecordedPrompt(op);
    const detail::Grid grid(geometry_);
    const detail::Intensity intensity(image_);
    UndoStep step;
    step.op = op;
    detail::Canvas canvas(labels_, step.tiles);
    ApplyReport report;
    report.kind = op.kind;
    if (op.label > canvas.maxLabel() || op.other > canvas.maxLabel() ||
        op.overwrite.label > canvas.maxLabel())
        return invalidArgument(
            fmt::format("label {} does not fit the uint8 label map (at most 255)",
                        std::max({op.label, op.other, op.overwrite.label})));
    Status status;
    switch (op.kind) {
        case OpKind::kPaint:
        case OpKind::kErase:
            status = detail::applyBrush(op, grid, intensity, canvas);
            break;
        case OpKind::kThreshold:
            status = detail::applyThreshold(op, grid, intensity, canvas);
            break;
        case OpKind::kFloodFill:
            status = detail::applyFloodFill(op, grid, intensity, canvas);
            break;
        case OpKind::kLevelTrace:
            status = detail::applyLevelTrace(op, grid, intensity, canvas);
            break;
        case OpKind::kFillBetweenSlices:
            status = detail::applyFillBetweenSlices(op, grid, canvas);
            break;
        case OpKind::kIslands:
            status = detail::applyIslands(op, grid, canvas, report.new_labels);
            break;
        case OpKind::kMedian:
        case OpKind::kOpening:
        case OpKind::kClosing:
        case OpKind::kMargin:
            status = detail::applyMorphology(op, grid, canvas);
            break;
        case OpKind::kLogical:
            status = detail::applyLogical(op, grid, canvas);
            break;
        default:  // undo, redo, prompts: handled above
            break;
    }
    if (!status.isOk()) {
        for (const TileChange& t : step.tiles) canvas.writeTile(t.tile, t.before);
        return status.withContext(std::string(opName(op.kind)) + ": ");
    }
    return finishStep(step, canvas, report);
}

Result<ApplyReport> LabelEditor::applyComputed(
    const EditOp& op, const std::array<int64_t, 3>& lo, const std::array<int64_t, 3>& hi,
    const std::function<int(int64_t index, int current)>& value) {
    UndoStep step;
    step.op = op;
    detail::Canvas canvas(labels_, step.tiles);
    ApplyReport report;
    report.kind = op.kind;
    std::array<int64_t, 3> a{}, b{};
    for (int d = 0; d < 3; ++d) {
        a[d] = std::max<int64_t>(lo[d], 0);
        b[d] = std::min<int64_t>(hi[d], geometry_.size[d] - 1);
    }
    const int64_t nx = geometry_.size[0], ny = geometry_.size[1];
    for (int64_t k = a[2]; k <= b[2]; ++k)
        for (int64_t j = a[1]; j <= b[1]; ++j)
            for (int64_t i = a[0]; i <= b[0]; ++i) {
                const int64_t idx = i + nx * (j + ny * k);
                const int v = value(idx, canvas.get(idx));
                if (v < 0 || v > canvas.maxLabel()) {
                    for (const TileChange& t : step.tiles) canvas.writeTile(t.tile, t.before);
                    return invalidArgument(
                        fmt::format("{}: label {} does not fit the label map (at most {})",
                                    opName(op.kind), v, canvas.maxLabel()));
                }
                canvas.set(i, j, k, v);
            }
    return finishStep(step, canvas, report);
}

ApplyReport LabelEditor::finishStep(UndoStep& step, detail::Canvas& canvas, ApplyReport report) {
    std::vector<TileChange> kept;
    const size_t bpv = labels_.pixelType() == PixelType::kUInt16 ? 2 : 1;
    for (TileChange& t : step.tiles) {
        canvas.readTile(t.tile, t.after);
        if (t.after == t.before) continue;
        sparsify(t, bpv);
        kept.push_back(std::move(t));
    }
    step.tiles = std::move(kept);
    report.voxels_changed = canvas.changed();
    report.tiles_recorded = static_cast<int>(step.tiles.size());
    report.bytes_recorded = step.bytes();
    describe(step, geometry_, bpv, report);
    push(std::move(step));
    return report;
}

namespace {
ApplyReport restore(const Volume& labels, const UndoStep& step, bool forward) {
    std::vector<TileChange> unused;
    detail::Canvas canvas(labels, unused);
    ApplyReport r;
    r.kind = forward ? OpKind::kRedo : OpKind::kUndo;
    const size_t bpv = labels.pixelType() == PixelType::kUInt16 ? 2 : 1;
    std::vector<uint8_t> buffer;
    for (const TileChange& t : step.tiles) {
        if (t.offsets.empty()) {
            canvas.writeTile(t.tile, forward ? t.after : t.before);
            continue;
        }
        canvas.readTile(t.tile, buffer);
        const std::vector<uint16_t>& values = forward ? t.sparse_after : t.sparse_before;
        for (size_t n = 0; n < t.offsets.size(); ++n) {
            if (bpv == 1)
                buffer[t.offsets[n]] = static_cast<uint8_t>(values[n]);
            else
                std::memcpy(buffer.data() + 2 * size_t{t.offsets[n]}, &values[n], 2);
        }
        canvas.writeTile(t.tile, buffer);
    }
    r.bytes_recorded = step.bytes();
    r.tiles_recorded = static_cast<int>(step.tiles.size());
    return r;
}
}  // namespace

Result<ApplyReport> LabelEditor::undo() {
    if (undo_.empty()) return Status(StatusCode::kFailedPrecondition, "undo: nothing to undo");
    ApplyReport r = restore(labels_, undo_.back(), false);
    describe(undo_.back(), geometry_, bytesPerVoxel(labels_), r);
    redo_.push_back(std::move(undo_.back()));
    undo_.pop_back();
    return r;
}

Result<ApplyReport> LabelEditor::redo() {
    if (redo_.empty()) return Status(StatusCode::kFailedPrecondition, "redo: nothing to redo");
    ApplyReport r = restore(labels_, redo_.back(), true);
    describe(redo_.back(), geometry_, bytesPerVoxel(labels_), r);
    undo_.push_back(std::move(redo_.back()));
    redo_.pop_back();
    return r;
}

const char* LabelChange::algorithmType() const {
    if (!changed()) return "AUTOMATIC";
    return voxels_before > 0 ? "SEMIAUTOMATIC" : "MANUAL";
}

std::string LabelChange::algorithmTypeAfter(const std::string& before) const {
    if (!changed() && !before.empty()) return before;
    if (changed() && before == "MANUAL") return before;
    return algorithmType();
}

Result<std::vector<LabelChange>> compareLabelMaps(const Volume& before, const Volume& after) {
    if (before.geometry().size != after.geometry().size)
        return invalidArgument("label maps of different sizes cannot be compared");
    auto read = [](const Volume& v) -> std::function<int(int64_t)> {
        if (v.pixelType() == PixelType::kUInt8) {
            const uint8_t* d = v.data<uint8_t>();
            return [d](int64_t i) { return int(d[i]); };
        }
        const uint16_t* d = v.data<uint16_t>();
        return [d](int64_t i) { return int(d[i]); };
    };
    for (const Volume* v : {&before, &after})
        if (v->pixelType() != PixelType::kUInt8 && v->pixelType() != PixelType::kUInt16)
            return unsupported("label maps are uint8 or uint16");
    const auto a = read(before), b = read(after);
    std::vector<int64_t> n_before(65536), n_after(65536), added(65536), removed(65536);
    const int64_t n = before.geometry().voxelCount();
    for (int64_t i = 0; i < n; ++i) {
        const int x = a(i), y = b(i);
        ++n_before[x];
        ++n_after[y];
        if (x != y) {
            ++removed[x];
            ++added[y];
        }
    }
    std::vector<LabelChange> out;
    for (int l = 1; l < 65536; ++l) {
        if (n_before[l] == 0 && n_after[l] == 0) continue;
        out.push_back({l, n_before[l], n_after[l], added[l], removed[l]});
    }
    return out;
}

}  // namespace voxseg::edit
