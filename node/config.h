// The configuration of `voxseg serve` (node.json): who may send, where the spool is, which
// series go to which model, where results are sent. docs/node.md documents every key.
//
// loadNodeConfig validates the whole file at start-up: unknown keys, wrong types, routes naming
// missing destinations or model folders, bad regular expressions are errors naming the key; a
// route's segment options are parsed and checked by pipeline/segment_options_schema.h, with its
// messages ("routes[1].options.overlap: 0.99 is not a number in [0, 0.95]").
// Relative paths are relative to the configuration file's folder. Plain data: copy freely.
#pragma once

#include "core/status.h"
#include "io/dicom_net_tls.h"
#include "node/series_info.h"
#include "pipeline/segment.h"

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace voxseg::node {

struct AllowedCaller {
    std::string ae_title;
    std::string host;  // empty: any address
};

// TLS for DICOM associations, in or out (io/dicom_net_tls.h). PEM files.
using TlsConfig = io::DicomTlsConfig;

struct RouteMatch {
    std::vector<std::string> modality;   // any of (empty: any)
    std::vector<std::string> body_part;  // BodyPartExamined, any of, case-insensitive
    std::string series_description;      // ECMAScript regex searched in SeriesDescription
    std::optional<std::regex> series_description_re;
    std::vector<std::string> calling_ae;  // any of
    int min_slices = 0;
    int max_slices = 1000000;
};

struct Route {
    std::string name;
    RouteMatch match;
    std::string model;  // model package folder (absolute after loading)
    // The route's segment options: "outputs" (seg, rtstruct, stats; default seg), "seg_type" and
    // every option of pipeline/segment_options_schema.h under "options" (device, precision,
    // overlap, tta, batch, accumulator, post-processing, ...), parsed by the schema.
    pipeline::SegmentOptions segment;
    std::vector<std::string> send_to;  // destination names
};

enum class DestinationKind { kDicom, kDicomWeb };

struct Destination {
    std::string name;
    DestinationKind kind = DestinationKind::kDicom;
    // DICOM (C-STORE SCU)
    std::string ae_title;
    std::string host;
    int port = 104;
    TlsConfig tls;
    // DICOMweb (STOW-RS)
    std::string url;                // e.g. https://pacs/dicom-web/studies
    std::string bearer_token_file;  // optional; the token is read at each send
    std::string ca_file;            // optional CA bundle for https (default: the system's)
    double timeout_seconds = 60.0;
};

struct SendPolicy {
    int attempts = 4;                    // per destination before the result is held
    double initial_delay_seconds = 2.0;  // doubled after every failed attempt
};

struct NodeConfig {
    std::string file;  // where it was read from
    std::string ae_title = "VOXSEG";
    // Accept associations whatever AE title the caller calls (some PACS are configured with a
    // wrong one); default: refused as "called AE title not recognized" unless it is ae_title.
    bool accept_any_called_ae = false;
    int port = 11112;
    std::vector<AllowedCaller> allowed_callers;
    int max_associations = 8;
    std::string spool_dir;
    double quiet_seconds = 5.0;
    // How long a series whose association was interrupted (aborted, or the node stopped while
    // it arrived) waits for the sender to send it again before it is segmented as received.
    double interrupted_wait_seconds = 120.0;
    GroupBy group_by = GroupBy::kSeries;  // what quiet_seconds applies to
    double unmatched_retention_hours = 24.0;
    uint64_t min_free_bytes = 5ull << 30;  // disk guard on the spool's file system
    std::string audit_log;                 // JSON lines; default <spool>/audit.jsonl
    int http_port = 0;                     // /healthz and /metrics; 0: off
    std::string http_bind = "127.0.0.1";
    TlsConfig tls;  // receiving side
    SendPolicy send;
    std::string spool_key_file;  // 32-byte key: received instances and results encrypted at rest
    std::string trusted_keys;    // model signing keys (docs/security.md); empty: unchecked
    bool require_signed_models = false;  // refuse unsigned model packages
    std::vector<Route> routes;
    std::vector<Destination> destinations;

    const Destination* destination(const std::string& name) const;
};

Result<NodeConfig> loadNodeConfig(const std::string& path);
// The same from text (tests); `file` names it in errors, `base_dir` resolves relative paths.
Result<NodeConfig> parseNodeConfig(const std::string& text, const std::string& file,
                                   const std::string& base_dir);

}  // namespace voxseg::node
