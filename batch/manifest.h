// The list of cases of a batch: a CSV manifest (header row `case_id,input[,series]`, plus
// `channel:NAME` columns for multi-channel models), a JSON-lines manifest (one object per line
// with the same keys; channels as {"channels": {"NAME": "VALUE"}}) or a root folder with one case
// per sub-folder (a DICOM study, or a folder holding one image file such as .nii.gz).
//
// Case ids name the output folders, the journal entries and the log lines, so they must be safe
// file names ([A-Za-z0-9._-], not starting with '.') and unique; they should be pseudonyms, never
// patient names or IDs. Relative inputs in a manifest are relative to the manifest's folder.
// Plain functions, no state: thread-safe.
#pragma once

#include "core/limits.h"
#include "core/status.h"

#include <string>
#include <utility>
#include <vector>

namespace voxseg::batch {

struct BatchCase {
    std::string id;      // output folder name
    std::string input;   // DICOM folder/file or image file (absolute or as given)
    std::string series;  // index or SeriesInstanceUID; empty = the only candidate
    // Multi-channel models: (channel name, path or series) as `--channel NAME=VALUE` takes them,
    // from CSV columns "channel:NAME" or a JSON "channels" object; paths resolved like `input`.
    std::vector<std::pair<std::string, std::string>> channels;
};

// Reads a manifest file (.csv, .jsonl/.ndjson/.json; other names are sniffed: '{' = JSON lines)
// or lists a root folder. Errors name the manifest and the line.
// More than `max_rows` cases, or a file larger than kMaxManifestBytes, is refused.
Result<std::vector<BatchCase>> readManifest(const std::string& path,
                                            size_t max_rows = readLimits().manifest_rows);

Result<std::vector<BatchCase>> parseCsvManifest(const std::string& text,
                                                const std::string& base_dir,
                                                const std::string& name,
                                                size_t max_rows = readLimits().manifest_rows);
Result<std::vector<BatchCase>> parseJsonLinesManifest(const std::string& text,
                                                      const std::string& base_dir,
                                                      const std::string& name,
                                                      size_t max_rows = readLimits().manifest_rows);
// One case per non-hidden sub-folder of `root`, sorted by name; `exclude` (e.g. the output
// folder when it lies inside the root) is skipped.
Result<std::vector<BatchCase>> listCaseFolders(const std::string& root,
                                               const std::string& exclude = {});

// Empty when `id` is a usable case id, else the reason.
std::string caseIdProblem(const std::string& id);

}  // namespace voxseg::batch
