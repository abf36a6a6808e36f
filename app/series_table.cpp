#include "app/series_table.h"

#include "core/free_text.h"

#include <fmt/format.h>

namespace voxseg::app {
namespace {

std::string sizeText(const Geometry& g) {
    return fmt::format("{}x{}x{}", g.size[0], g.size[1], g.size[2]);
}

std::string spacingText(const Geometry& g) {
    return fmt::format("{:.4g}x{:.4g}x{:.4g}", g.spacing[0], g.spacing[1], g.spacing[2]);
}

std::string orientationText(const Geometry& g) {
    const double oblique = g.obliquityDegrees();
    return oblique > 0.5 ? fmt::format("{} ({:.1f} deg oblique)", g.orientationCode(), oblique)
                         : g.orientationCode();
}

}  // namespace

VolumeRow rowFromCandidate(const io::SeriesCandidate& c, bool show_phi) {
    VolumeRow r;
    r.index = c.index;
    r.format = "DICOM";
    r.series_uid = c.series_uid;
    r.modality = c.modality;
    r.description = log::displayFreeText(c.description, show_phi);  // core/free_text.h
    r.geometry = c.geometry;
    r.num_files = c.num_files;
    r.split_reason = c.split_reason;
    r.warnings = c.warnings;
    if (show_phi) r.patient = c.patient;
    return r;
}

VolumeRow rowFromImage(const std::string& path, const io::ImageHeader& header) {
    VolumeRow r;
    r.index = -1;
    r.source = path;
    r.format = io::imageFormatName(header.format);
    r.pixel_type = pixelTypeName(header.pixel_type);
    r.geometry = header.geometry;
    r.num_files = 1;
    return r;
}

void printTable(const InfoReport& report, std::FILE* out) {
    fmt::print(out, "{:<5} {:<8} {:<13} {:<21} {:<24} {:>5}  {}\n", "#", "modality", "size",
               "spacing (mm)", "orientation", "files", "series / file");
    for (const auto& r : report.rows) {
        const std::string index = r.index >= 0 ? std::to_string(r.index) : "-";
        const std::string what = r.source.empty() ? r.series_uid : r.source;
        const std::string modality = r.modality.empty() ? "-" : r.modality;
        fmt::print(out, "{:<5} {:<8} {:<13} {:<21} {:<24} {:>5}  {}\n", index, modality,
                   sizeText(r.geometry), spacingText(r.geometry), orientationText(r.geometry),
                   r.num_files, what);
        if (!r.description.empty()) fmt::print(out, "      description: {}\n", r.description);
        if (!r.pixel_type.empty())
            fmt::print(out, "      format: {}, {}\n", r.format, r.pixel_type);
        if (r.patient)
            fmt::print(out, "      patient: name \"{}\", id \"{}\", birth date \"{}\"\n",
                       r.patient->name, r.patient->id, r.patient->birth_date);
        if (!r.split_reason.empty()) fmt::print(out, "      split: {}\n", r.split_reason);
        for (const auto& w : r.warnings) fmt::print(out, "      warning: {}\n", w);
    }
    if (!report.skipped.empty()) {
        fmt::print(out, "skipped {} file{}:\n", report.skipped.size(),
                   report.skipped.size() == 1 ? "" : "s");
        for (const auto& s : report.skipped) fmt::print(out, "  {}: {}\n", s.path, s.reason);
    }
}

nlohmann::json toJson(const InfoReport& report) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : report.rows) {
        const Geometry& g = r.geometry;
        nlohmann::json j = {
            {"index", r.index >= 0 ? nlohmann::json(r.index) : nlohmann::json(nullptr)},
            {"format", r.format},
            {"series_uid", r.series_uid},
            {"modality", r.modality},
            {"description", r.description},
            {"size", {g.size[0], g.size[1], g.size[2]}},
            {"spacing_mm", {g.spacing[0], g.spacing[1], g.spacing[2]}},
            {"origin_lps_mm", {g.origin[0], g.origin[1], g.origin[2]}},
            {"direction", g.direction},
            {"orientation", g.orientationCode()},
            {"obliquity_deg", g.obliquityDegrees()},
            {"num_files", r.num_files},
            {"split_reason", r.split_reason},
            {"warnings", r.warnings},
        };
        if (!r.source.empty()) j["path"] = r.source;
        if (!r.pixel_type.empty()) j["pixel_type"] = r.pixel_type;
        if (r.patient)
            j["patient"] = {{"name", r.patient->name},
                            {"id", r.patient->id},
                            {"birth_date", r.patient->birth_date}};
        rows.push_back(std::move(j));
    }
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& s : report.skipped)
        skipped.push_back({{"path", s.path}, {"reason", s.reason}});
    return {{"volumes", rows}, {"skipped", skipped}};
}

void printCandidates(const std::vector<io::SeriesCandidate>& candidates, const std::string& input) {
    InfoReport report;
    for (const auto& c : candidates) report.rows.push_back(rowFromCandidate(c, false));
    std::fprintf(stderr,
                 "%zu candidate volumes in %s; choose one with --series INDEX or --series UID:\n",
                 candidates.size(), input.c_str());
    printTable(report, stderr);
}

}  // namespace voxseg::app
