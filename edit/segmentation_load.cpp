#include "edit/segmentation_load.h"

#include "core/file_io.h"
#include "io/dicom_charset.h"
#include "pipeline/segmentation_files.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>
#include <set>
#include <type_traits>

namespace voxseg::edit {
namespace {

constexpr size_t kNameBytes = 64;  // SegmentLabel and ROIName hold 64 characters
constexpr int kColourSlack = 2;    // sRGB -> CIELab (16 bit) -> sRGB may move a channel by 1

// Whether the sidecar entry `s` names the file's segment `name` (the file may hold it cut).
bool describes(const SegmentMeta& s, const std::string& name) {
    if (s.name == name) return true;
    return !name.empty() && s.name.starts_with(name) &&
           io::charset::truncateUtf8(s.name, kNameBytes) == name;
}

bool sameCode(const CodedConcept& a, const CodedConcept& b) {
    return a.code == b.code && a.scheme == b.scheme;
}

bool closeColour(const std::array<uint8_t, 3>& a, const std::array<uint8_t, 3>& b) {
    for (size_t c = 0; c < 3; ++c)
        if (std::abs(int(a[c]) - int(b[c])) > kColourSlack) return false;
    return true;
}

// The file's segment `f` completed by its sidecar entry `s` (the rules in the header).
SegmentMeta completed(const io::SegmentDescription& file, const SegmentMeta& s, bool rtstruct) {
    SegmentMeta m = fromSegmentDescription(file);
    m.value = s.value;
    m.name = s.name;
    if (closeColour(m.color, s.color)) m.color = s.color;
    if (rtstruct || sameCode(m.category, s.category)) m.category = s.category;
    if (sameCode(m.type, s.type)) m.type = s.type;
    if (!reviewStatusInDescription(file.description)) m.status = s.status;
    if (!s.algorithm_type.empty()) m.algorithm_type = s.algorithm_type;
    return m;
}

// The voxseg sidecar beside `path`, if there is one: nothing (no file, or a .json of another
// format), the entries, or a warning saying why it is not used.
struct SidecarRead {
    std::string path;
    std::optional<std::vector<SegmentMeta>> segments;
    std::string warning;
};
SidecarRead readSidecar(const std::string& path) {
    SidecarRead out;
    out.path = sidecarPath(path);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(out.path, ec)) return out;
    auto text = readFileBytes(out.path, "the label sidecar");
    if (!text.isOk()) {
        out.warning = text.status().message();
        return out;
    }
    const auto root = nlohmann::json::parse(*text, nullptr, false);
    if (root.is_discarded() || !root.is_object() || !root.contains("format") ||
        root["format"] != "voxseg-labels")
        return out;  // another tool's .json (a BIDS sidecar): not ours
    auto parsed = segmentsFromJson(*text);
    if (!parsed.isOk())
        out.warning =
            fmt::format("label sidecar {} not used: {}", out.path, parsed.status().message());
    else
        out.segments = std::move(parsed.value());
    return out;
}

// Renumbers the voxels of `map` (values from -> to, all at once); a uint8 map becomes uint16
// when a new value needs it.
void renumber(Volume& map, const std::vector<std::pair<int, int>>& from_to) {
    int top_old = 0, top_new = 0;
    bool moved = false;
    for (const auto& [from, to] : from_to) {
        top_old = std::max(top_old, from);
        top_new = std::max(top_new, to);
        moved |= from != to;
    }
    if (!moved) return;
    if (map.pixelType() == PixelType::kUInt8 && top_new > 255) map = map.castTo(PixelType::kUInt16);
    std::vector<int> lut(static_cast<size_t>(top_old) + 1);
    std::iota(lut.begin(), lut.end(), 0);
    for (const auto& [from, to] : from_to) lut[static_cast<size_t>(from)] = to;
    const int64_t n = map.geometry().voxelCount();
    visitPixels(map, [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {  // SEG/RTSTRUCT maps
            for (int64_t i = 0; i < n; ++i)
                if (p[i] <= static_cast<T>(top_old))
                    p[i] = static_cast<T>(lut[static_cast<size_t>(p[i])]);
        }
    });
}

std::vector<io::SegmentDescription> describe(const std::vector<SegmentMeta>& segments) {
    std::vector<io::SegmentDescription> out;
    for (const SegmentMeta& m : segments) out.push_back(toSegmentDescription(m));
    return out;
}

}  // namespace

Result<SidecarMerge> mergeSidecar(const std::vector<io::SegmentDescription>& from_file,
                                  const std::vector<SegmentMeta>& sidecar, bool rtstruct) {
    SidecarMerge out;
    std::vector<bool> used(sidecar.size(), false);
    std::set<int> values;
    for (const io::SegmentDescription& f : from_file) {
        const std::string name = fromSegmentDescription(f).name;
        int match = -1;
        for (size_t j = 0; j < sidecar.size(); ++j) {
            if (used[j] || !describes(sidecar[j], name)) continue;
            if (match < 0) match = static_cast<int>(j);
            if (sidecar[j].value == f.value) {  // the same name twice: the same value first
                match = static_cast<int>(j);
                break;
            }
        }
        if (match < 0)
            return invalidArgument(
                fmt::format("it does not describe segment {} \"{}\" of the file", f.value, name));
        used[static_cast<size_t>(match)] = true;
        const SegmentMeta& s = sidecar[static_cast<size_t>(match)];
        if (!values.insert(s.value).second)
            return invalidArgument(fmt::format("it gives value {} twice", s.value));
        out.segments.push_back(completed(f, s, rtstruct));
        out.values.push_back(s.value);
    }
    // Labels without voxels (the writers leave them out) keep their rows.
    for (size_t j = 0; j < sidecar.size(); ++j)
        if (!used[j] && values.insert(sidecar[j].value).second) out.segments.push_back(sidecar[j]);
    std::sort(out.segments.begin(), out.segments.end(),
              [](const SegmentMeta& a, const SegmentMeta& b) { return a.value < b.value; });
    return out;
}

Result<LoadedSegmentation> loadSegmentation(const std::string& path, const Geometry& grid,
                                            const io::SeriesCandidate* series,
                                            const Progress& progress) {
    VOXSEG_ASSIGN_OR_RETURN(pipeline::SegmentationFile file,
                            pipeline::readSegmentationFile(path, grid, series, progress));
    LoadedSegmentation out;
    out.label_map = std::move(file.label_map);
    out.kind = file.kind;
    out.overlapping_voxels = file.overlapping_voxels;
    out.warnings = std::move(file.warnings);
    SidecarRead sidecar = readSidecar(path);
    if (!sidecar.warning.empty()) out.warnings.push_back(sidecar.warning);

    if (file.kind == "label map") {  // the voxels alone: the sidecar says everything else
        if (sidecar.segments) {
            out.segments = std::move(*sidecar.segments);
            std::sort(out.segments.begin(), out.segments.end(),
                      [](const SegmentMeta& a, const SegmentMeta& b) { return a.value < b.value; });
            out.descriptions = describe(out.segments);
            out.sidecar = sidecar.path;
        }
        return out;
    }

    const bool rtstruct = file.kind == "RTSTRUCT";
    std::optional<SidecarMerge> merged;
    if (sidecar.segments) {
        auto m = mergeSidecar(file.segments, *sidecar.segments, rtstruct);
        if (m.isOk())
            merged = std::move(m.value());
        else
            out.warnings.push_back(
                fmt::format("label sidecar {} not used: {}", sidecar.path, m.status().message()));
    }
    if (!merged) {
        merged.emplace();
        for (const io::SegmentDescription& d : file.segments) {
            merged->segments.push_back(fromSegmentDescription(d));
            merged->values.push_back(d.value);
        }
        std::sort(merged->segments.begin(), merged->segments.end(),
                  [](const SegmentMeta& a, const SegmentMeta& b) { return a.value < b.value; });
    } else {
        out.sidecar = sidecar.path;
    }
    std::vector<std::pair<int, int>> from_to;
    for (size_t i = 0; i < file.segments.size(); ++i)
        from_to.emplace_back(file.segments[i].value, merged->values[i]);
    renumber(out.label_map, from_to);
    out.segments = std::move(merged->segments);
    out.descriptions = describe(out.segments);
    for (io::SegmentDescription& d : out.descriptions)  // the file's algorithm name stays
        for (size_t i = 0; i < file.segments.size(); ++i)
            if (merged->values[i] == d.value) d.algorithm_name = file.segments[i].algorithm_name;
    return out;
}

}  // namespace voxseg::edit
