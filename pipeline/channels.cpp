#include "pipeline/channels.h"

#include "core/log.h"
#include "io/image_io.h"
#include "pipeline/resample.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

namespace voxseg::pipeline {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "channels";

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
    return s;
}

std::string channelNames(const engine::ModelPackage& model) {
    std::string names;
    for (const auto& c : model.channels) names += (names.empty() ? "" : ", ") + c.name;
    return names;
}

// Without SeriesDescription: messages are logged and kept, free text never is
// (core/free_text.h); the messages point to `voxseg info`, which shows it.
std::string seriesLine(const io::SeriesCandidate& s) {
    std::ostringstream o;
    o << "#" << s.index << " " << s.modality;
    if (s.echo_time > 0) o << " TE " << s.echo_time << " ms";
    o << " (" << s.series_uid << ")";
    return o.str();
}

// Loads one candidate of a scan as a channel.
Result<StudyInput> loadCandidate(const io::SeriesCandidate& candidate,
                                 const io::DicomLoadOptions& dicom, const Progress& progress) {
    StudyInput in;
    VOXSEG_ASSIGN_OR_RETURN(in.volume, io::loadSeries(candidate, dicom, progress));
    in.series = candidate;
    return in;
}

// The study's series a channel's rules pick (exactly one, not yet taken), or an error naming it.
Result<const io::SeriesCandidate*> pickByRules(const io::DicomScanResult& scan,
                                               const engine::ChannelSpec& channel,
                                               const std::vector<std::string>& taken,
                                               const std::string& input) {
    std::vector<const io::SeriesCandidate*> matches;
    for (const auto& s : scan.series)
        if (seriesMatchesChannel(s, channel) &&
            std::find(taken.begin(), taken.end(), s.series_uid) == taken.end())
            matches.push_back(&s);
    if (matches.size() == 1) return matches[0];
    std::string list;
    for (const auto* s : matches.empty() ? std::vector<const io::SeriesCandidate*>{} : matches)
        list += "\n  " + seriesLine(*s);
    if (matches.empty()) {
        for (const auto& s : scan.series) list += "\n  " + seriesLine(s);
        return notFound("channel " + channel.name + ": no series of the study matches its rules (" +
                            describeChannelRules(channel) + "); give it with --channel " +
                            channel.name + "=PATH|SERIES (a manifest column channel:" +
                            channel.name + " in batch). Series here (`voxseg info " + input +
                            "` shows their descriptions):" + list,
                        input);
    }
    return Status(StatusCode::kAmbiguous,
                  "channel " + channel.name + ": " + std::to_string(matches.size()) +
                      " series match its rules (" + describeChannelRules(channel) +
                      "); pick one with --channel " + channel.name + "=SERIES (`voxseg info " +
                      input + "` shows their descriptions):" + list,
                  input);
}

// The channel from an explicit VALUE: a path of its own, or a series of the main input's scan.
Result<StudyInput> loadAssigned(const engine::ChannelSpec& channel, const std::string& value,
                                const io::DicomScanResult* scan, const io::DicomLoadOptions& dicom,
                                const Progress& progress) {
    std::error_code ec;
    if (fs::exists(value, ec)) {
        auto in = loadStudy(value, "", dicom, progress);
        if (!in.isOk())
            return in.status().withContext("channel " + channel.name + " (" + value + "): ");
        return in;
    }
    if (!scan)
        return notFound("channel " + channel.name + ": \"" + value +
                            "\" is neither a file or folder nor a series of a DICOM input",
                        value);
    auto chosen = io::selectSeries(*scan, value);
    if (!chosen.isOk()) return chosen.status().withContext("channel " + channel.name + ": ");
    return loadCandidate(**chosen, dicom, progress);
}

}  // namespace

Result<std::vector<ChannelAssignment>> parseChannelAssignments(
    const std::vector<std::string>& entries) {
    std::vector<ChannelAssignment> out;
    for (const std::string& e : entries) {
        const auto eq = e.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == e.size())
            return invalidArgument(
                "--channel expects NAME=PATH or NAME=SERIES (the model's "
                "channel name, then a file, folder, series index or UID), got \"" +
                e + "\"");
        ChannelAssignment a{e.substr(0, eq), e.substr(eq + 1)};
        for (const auto& b : out)
            if (b.name == a.name) return invalidArgument("--channel " + a.name + " is given twice");
        out.push_back(std::move(a));
    }
    return out;
}

bool seriesMatchesChannel(const io::SeriesCandidate& series, const engine::ChannelSpec& channel) {
    if (!channel.modality.empty() && upper(series.modality) != upper(channel.modality))
        return false;
    const engine::SeriesMatch& m = channel.match;
    if (!m.series_description.empty()) {
        const std::regex re(m.series_description, std::regex::ECMAScript | std::regex::icase);
        if (!std::regex_search(series.description, re)) return false;
    }
    if (!m.image_type.empty()) {
        std::stringstream ss(series.image_type);
        std::string value;
        bool found = false;
        while (std::getline(ss, value, '\\')) found |= upper(value) == upper(m.image_type);
        if (!found) return false;
    }
    if (m.echo_time_ms) {
        const double te = series.echo_time;
        if (!(te > 0 && te >= (*m.echo_time_ms)[0] && te <= (*m.echo_time_ms)[1])) return false;
    }
    return true;
}

std::string describeChannelRules(const engine::ChannelSpec& channel) {
    std::ostringstream o;
    o << (channel.modality.empty() ? "any modality" : "modality " + channel.modality);
    const engine::SeriesMatch& m = channel.match;
    if (!m.series_description.empty())
        o << ", SeriesDescription ~ /" << m.series_description << "/i";
    if (!m.image_type.empty()) o << ", ImageType has " << m.image_type;
    if (m.echo_time_ms)
        o << ", echo time " << (*m.echo_time_ms)[0] << ".." << (*m.echo_time_ms)[1] << " ms";
    return o.str();
}

Result<Volume> resampleChannelOnto(const Volume& channel, const Geometry& grid) {
    const Geometry g = channel.geometry();
    // Overlap: the channel's corners in the grid's continuous index space.
    Vec3 lo{1e300, 1e300, 1e300}, hi{-1e300, -1e300, -1e300};
    for (int c = 0; c < 8; ++c) {
        const Vec3 idx{(c & 1) ? g.size[0] - 0.5 : -0.5, (c & 2) ? g.size[1] - 0.5 : -0.5,
                       (c & 4) ? g.size[2] - 0.5 : -0.5};
        const Vec3 at = grid.physicalToIndex(g.indexToPhysical(idx));
        for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], at[a]), hi[a] = std::max(hi[a], at[a]);
    }
    for (int a = 0; a < 3; ++a)
        if (hi[a] < -0.5 || lo[a] > static_cast<double>(grid.size[a]) - 0.5)
            return invalidArgument(
                "the channel does not overlap the first channel anywhere (another patient "
                "position or frame of reference?)",
                channel.info().source);
    auto resampled = resampleLinearOnto(channel, grid);
    if (!resampled.isOk())
        return resampled.status().withContext("resampling a channel onto the first one's grid");
    return resampled;
}

Result<StudyInput> loadStudyChannels(const std::string& path, const std::string& selector,
                                     const std::vector<ChannelAssignment>& assignments,
                                     const engine::ModelPackage& model,
                                     const io::DicomLoadOptions& dicom, const Progress& progress,
                                     std::vector<io::SeriesCandidate>* candidates_out) {
    std::map<std::string, std::string> given;
    for (const auto& a : assignments) {
        const bool known =
            std::any_of(model.channels.begin(), model.channels.end(),
                        [&](const engine::ChannelSpec& c) { return c.name == a.name; });
        if (!known)
            return invalidArgument(
                "--channel " + a.name + ": model " + model.name +
                    " has no channel of that name (its channels: " + channelNames(model) + ")",
                model.folder.string());
        given[a.name] = a.value;
    }
    if (model.channels.size() <= 1 && given.empty())
        return loadStudy(path, selector, dicom, progress, candidates_out);

    std::error_code ec;
    if (!fs::exists(path, ec)) return notFound("input not found", path);
    const bool image_input = io::isImageFile(path);
    std::optional<io::DicomScanResult> scan;
    if (!image_input) {
        VOXSEG_ASSIGN_OR_RETURN(scan, io::scanDicom({path}, {}, progress.sub(0.0, 0.1)));
        if (candidates_out) *candidates_out = scan->series;
    }
    const size_t n = model.channels.size();
    std::vector<StudyInput> loaded;
    std::vector<std::string> taken;  // series UIDs already used
    for (size_t c = 0; c < n; ++c) {
        const engine::ChannelSpec& ch = model.channels[c];
        const Progress p = progress.sub(0.1 + 0.8 * c / n, 0.1 + 0.8 * (c + 1) / n);
        StudyInput in;
        if (auto it = given.find(ch.name); it != given.end()) {
            VOXSEG_ASSIGN_OR_RETURN(
                in, loadAssigned(ch, it->second, scan ? &*scan : nullptr, dicom, p));
            in.channel_notes.push_back(ch.name + ": " + it->second + " (--channel)");
        } else if (image_input) {
            if (c != 0)
                return notFound("channel " + ch.name + " (" + describeChannelRules(ch) +
                                    "): an image file holds one channel; give the others with "
                                    "--channel " +
                                    ch.name + "=PATH",
                                path);
            VOXSEG_ASSIGN_OR_RETURN(in, loadStudy(path, "", dicom, p));
            in.channel_notes.push_back(ch.name + ": " + path);
        } else if (c == 0 && !selector.empty()) {
            VOXSEG_ASSIGN_OR_RETURN(const io::SeriesCandidate* s,
                                    io::selectSeries(*scan, selector));
            VOXSEG_ASSIGN_OR_RETURN(in, loadCandidate(*s, dicom, p));
            in.channel_notes.push_back(ch.name + ": series " + s->series_uid + " (--series)");
        } else {
            VOXSEG_ASSIGN_OR_RETURN(const io::SeriesCandidate* s,
                                    pickByRules(*scan, ch, taken, path));
            VOXSEG_ASSIGN_OR_RETURN(in, loadCandidate(*s, dicom, p));
            in.channel_notes.push_back(ch.name + ": series " + s->series_uid + " (" +
                                       describeChannelRules(ch) + ")");
        }
        if (in.series) taken.push_back(in.series->series_uid);
        loaded.push_back(std::move(in));
    }

    // One frame of reference (DICOM); image files carry none and are assumed to share one.
    const auto& first = loaded[0];
    StudyInput out;
    out.volume = first.volume;
    out.series = first.series;
    out.channel_notes = first.channel_notes;
    const Geometry grid = first.volume.geometry();
    for (size_t c = 1; c < n; ++c) {
        const std::string& name = model.channels[c].name;
        const std::string& name0 = model.channels[0].name;
        StudyInput& in = loaded[c];
        std::string note = in.channel_notes.front();
        if (first.series && in.series) {
            const std::string& a = first.series->frame_of_reference_uid;
            const std::string& b = in.series->frame_of_reference_uid;
            if (!a.empty() && !b.empty() && a != b)
                return invalidArgument("channel " + name + " (series " + in.series->series_uid +
                                           ") has FrameOfReferenceUID " + b + " but channel " +
                                           name0 + " has " + a +
                                           ": the channels must share one frame of reference "
                                           "(register them first)",
                                       path);
            if (a.empty() || b.empty())
                note += "; no FrameOfReferenceUID to compare: assumed shared";
        } else {
            note += "; image files carry no frame of reference: assumed shared with " + name0;
        }
        if (!in.volume.geometry().approxEqual(grid)) {
            auto on = resampleChannelOnto(in.volume, grid);
            if (!on.isOk()) return on.status().withContext("channel " + name + ": ");
            const Geometry g = in.volume.geometry();
            const std::string why = "channel " + name + " is on another grid (" +
                                    std::to_string(g.size[0]) + "x" + std::to_string(g.size[1]) +
                                    "x" + std::to_string(g.size[2]) + " voxels) than " + name0 +
                                    ": resampled onto " + name0 + "'s grid (trilinear)";
            log::info(kComponent, "{}", why);
            note += "; " + why;
            in.volume = std::move(*on);
        }
        out.channel_notes.push_back(note);
        for (const auto& w : in.volume.info().warnings) out.volume.info().warnings.push_back(w);
        out.extra_channels.push_back(std::move(in.volume));
        out.extra_series.push_back(in.series);
        out.load_seconds += in.load_seconds;
    }
    out.load_seconds += first.load_seconds;
    progress.report(1.0, "channels loaded");
    return out;
}

}  // namespace voxseg::pipeline
