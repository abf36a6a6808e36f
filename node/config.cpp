#include "node/config.h"

#include "core/file_io.h"
#include "core/json_object.h"
#include "pipeline/segment_options_schema.h"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace voxseg::node {
namespace fs = std::filesystem;
namespace {
// The longest wait or delay a setting may ask for: a day (longer is a typo, not a policy).
constexpr double kDaySeconds = 86400;
// The longest series_description pattern (SeriesDescription itself holds at most 64).
constexpr size_t kMaxPattern = 256;

// What std::regex may be given: libstdc++'s regex compiler recurses once per term (a pattern of
// thousands of terms overflows the stack) and reads a {n} bound or a \n back reference into a
// long without an overflow check (fuzz_node_config: UBSan, signed overflow in _M_cur_int_value).
Status checkPattern(const JsonObject& o, const std::string& key, const std::string& pattern) {
    if (pattern.size() > kMaxPattern)
        return o.error(key, fmt::format("a pattern of {} characters (at most {})", pattern.size(),
                                        kMaxPattern));
    size_t digits = 0;
    for (char ch : pattern) {
        digits = std::isdigit(static_cast<unsigned char>(ch)) ? digits + 1 : 0;
        if (digits > 9)
            return o.error(key,
                           "holds a number of more than 9 digits (write [0-9] for a digit of a "
                           "long literal)");
    }
    return Status::ok();
}

std::string resolve(const std::string& path, const std::string& base_dir) {
    if (path.empty() || fs::path(path).is_absolute()) return path;
    return (fs::path(base_dir) / path).lexically_normal().string();
}

Status readAeTitle(JsonObject& o, const std::string& key, std::string& out,
                   std::optional<std::string> fallback = {}) {
    VOXSEG_ASSIGN_OR_RETURN(out, o.string(key, fallback));
    if (out.empty() || out.size() > 16)
        return o.error(key, "an AE title has 1 to 16 characters, not '" + out + "'");
    for (char c : out)
        if (c == '\\' || static_cast<unsigned char>(c) < 0x20)
            return o.error(key, "an AE title may not hold control characters or '\\'");
    return Status::ok();
}

Status readTls(JsonObject& parent, const std::string& key, const std::string& base_dir,
               TlsConfig& tls) {
    if (!parent.has(key)) return Status::ok();
    VOXSEG_ASSIGN_OR_RETURN(JsonObject o, parent.object(key));
    VOXSEG_ASSIGN_OR_RETURN(tls.enabled, o.boolean("enabled", true));
    VOXSEG_ASSIGN_OR_RETURN(tls.certificate, o.string("certificate", std::string()));
    VOXSEG_ASSIGN_OR_RETURN(tls.private_key, o.string("private_key", std::string()));
    VOXSEG_ASSIGN_OR_RETURN(tls.trusted, o.strings("trusted"));
    VOXSEG_ASSIGN_OR_RETURN(tls.require_peer_certificate,
                            o.boolean("require_peer_certificate", true));
    tls.certificate = resolve(tls.certificate, base_dir);
    tls.private_key = resolve(tls.private_key, base_dir);
    for (auto& t : tls.trusted) t = resolve(t, base_dir);
    if (tls.enabled && tls.trusted.empty())
        return o.error("trusted", "TLS needs at least one trusted certificate (PEM)");
    VOXSEG_RETURN_IF_ERROR(o.finish());
    return Status::ok();
}

Status readMatch(JsonObject& route, RouteMatch& m) {
    VOXSEG_ASSIGN_OR_RETURN(JsonObject o, route.object("match", true));
    VOXSEG_ASSIGN_OR_RETURN(m.modality, o.strings("modality"));
    VOXSEG_ASSIGN_OR_RETURN(m.body_part, o.strings("body_part"));
    VOXSEG_ASSIGN_OR_RETURN(m.series_description, o.string("series_description", std::string()));
    VOXSEG_ASSIGN_OR_RETURN(m.calling_ae, o.strings("calling_ae"));
    VOXSEG_ASSIGN_OR_RETURN(int64_t lo, o.integer("min_slices", 0, 1000000, 0));
    VOXSEG_ASSIGN_OR_RETURN(int64_t hi, o.integer("max_slices", 0, 1000000, 1000000));
    m.min_slices = static_cast<int>(lo);
    m.max_slices = static_cast<int>(hi);
    if (lo > hi) return o.error("min_slices", "is larger than max_slices");
    if (!m.series_description.empty()) {
        VOXSEG_RETURN_IF_ERROR(checkPattern(o, "series_description", m.series_description));
        try {
            m.series_description_re =
                std::regex(m.series_description, std::regex::ECMAScript | std::regex::icase);
        } catch (const std::regex_error& e) {
            return o.error("series_description",
                           "not a regular expression (ECMAScript): " + std::string(e.what()));
        }
    }
    return o.finish();
}

// The value of `key` as the text the option schema parses: true/false for a flag, a number, a
// string, or (outputs, labels) a string or an array of strings, joined by commas.
Result<std::string> optionText(JsonObject& o, const std::string& key,
                               const pipeline::SegmentOptionSpec& spec) {
    using Kind = pipeline::SegmentOptionSpec::Kind;
    switch (spec.kind) {
        case Kind::kFlag: {
            VOXSEG_ASSIGN_OR_RETURN(const bool on, o.boolean(key));
            return std::string(on ? "true" : "false");
        }
        case Kind::kNumber:
        case Kind::kInteger: {  // the range is the schema's to check, with its message
            VOXSEG_ASSIGN_OR_RETURN(const double v,
                                    o.number(key, std::numeric_limits<double>::lowest(),
                                             std::numeric_limits<double>::max()));
            return fmt::format("{}", v);
        }
        case Kind::kList:
        case Kind::kText: {
            VOXSEG_ASSIGN_OR_RETURN(const auto items, o.strings(key));
            std::string text;
            for (const auto& i : items) text += (text.empty() ? "" : ",") + i;
            return text;
        }
        case Kind::kChoice:
            break;
    }
    return o.string(key);
}

// Applies `key` of `o` through the schema's spec; its errors name the key ("routes[0].options.
// overlap: 0.99 is not a number in [0, 0.95]").
Status applyOption(JsonObject& o, const std::string& key, const pipeline::SegmentOptionSpec& spec,
                   pipeline::SegmentOptions& so) {
    VOXSEG_ASSIGN_OR_RETURN(const std::string text, optionText(o, key, spec));
    if (Status st = spec.apply(text, so); !st.isOk())
        return o.error(key, pipeline::segmentOptionMessage(spec, st));
    if (&spec != &pipeline::segmentOptionSpec("--outputs")) return Status::ok();
    // The node sends DICOM results and keeps statistics: no label map, preview or probabilities.
    const pipeline::SegmentOutputs& out = so.outputs;
    for (const auto& [on, name] :
         {std::pair{out.label_map, "nifti"}, std::pair{out.preview, "preview"},
          std::pair{out.probabilities, "probabilities"}})
        if (on)
            return o.error(key, fmt::format("'{}' is not one of seg, rtstruct, stats (the node "
                                            "sends DICOM results and keeps statistics)",
                                            name));
    return Status::ok();
}

// A route's segment options: "outputs" and "seg_type" (where they always were) and "options",
// an object of any option the schema knows by its key (pipeline/segment_options_schema.h).
Status readSegmentOptions(JsonObject& route, pipeline::SegmentOptions& so) {
    const auto& outputs = pipeline::segmentOptionSpec("--outputs");
    const auto& seg_type = pipeline::segmentOptionSpec("--seg-type");
    VOXSEG_RETURN_IF_ERROR(outputs.apply("seg", so));  // the node's default: a DICOM SEG
    for (const auto* spec : {&outputs, &seg_type})
        if (route.has(spec->key)) VOXSEG_RETURN_IF_ERROR(applyOption(route, spec->key, *spec, so));
    VOXSEG_ASSIGN_OR_RETURN(JsonObject options, route.object("options", true));
    for (const auto& key : options.keys()) {
        const pipeline::SegmentOptionSpec* spec = pipeline::findSegmentOptionByKey(key);
        if (!spec) {
            std::string known;
            for (const auto& s : pipeline::segmentOptionSchema())
                known += (known.empty() ? "" : ", ") + s.key;
            return options.error(key, "unknown option (one of " + known + ")");
        }
        if (route.has(key))
            return options.error(key, "given twice: here and as " + route.keyPath(key));
        VOXSEG_RETURN_IF_ERROR(applyOption(options, key, *spec, so));
    }
    return options.finish();
}

Status readRoute(JsonObject& o, size_t index, const std::string& base_dir, Route& r) {
    VOXSEG_ASSIGN_OR_RETURN(r.name, o.string("name", "route-" + std::to_string(index)));
    VOXSEG_RETURN_IF_ERROR(readMatch(o, r.match));
    VOXSEG_ASSIGN_OR_RETURN(r.model, o.string("model"));
    r.model = resolve(r.model, base_dir);
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(r.model) / "model.json", ec))
        return o.error("model", "'" + r.model + "' is not a model package (no model.json)");
    VOXSEG_RETURN_IF_ERROR(readSegmentOptions(o, r.segment));
    VOXSEG_ASSIGN_OR_RETURN(r.send_to, o.strings("send_to"));
    return o.finish();
}

Status readDestination(JsonObject& o, const std::string& name, const std::string& base_dir,
                       Destination& d) {
    d.name = name;
    VOXSEG_ASSIGN_OR_RETURN(std::string type, o.string("type", std::string("dicom")));
    if (type == "dicom") {
        d.kind = DestinationKind::kDicom;
        VOXSEG_RETURN_IF_ERROR(readAeTitle(o, "ae_title", d.ae_title));
        VOXSEG_ASSIGN_OR_RETURN(d.host, o.string("host"));
        VOXSEG_ASSIGN_OR_RETURN(int64_t port, o.integer("port", 1, 65535));
        d.port = static_cast<int>(port);
        VOXSEG_RETURN_IF_ERROR(readTls(o, "tls", base_dir, d.tls));
    } else if (type == "dicomweb") {
        d.kind = DestinationKind::kDicomWeb;
        VOXSEG_ASSIGN_OR_RETURN(d.url, o.string("url"));
        if (d.url.rfind("http://", 0) != 0 && d.url.rfind("https://", 0) != 0)
            return o.error("url", "must start with http:// or https:// (the STOW-RS studies URL)");
        VOXSEG_ASSIGN_OR_RETURN(d.bearer_token_file, o.string("bearer_token_file", std::string()));
        d.bearer_token_file = resolve(d.bearer_token_file, base_dir);
        VOXSEG_ASSIGN_OR_RETURN(d.ca_file, o.string("ca_file", std::string()));
        d.ca_file = resolve(d.ca_file, base_dir);
    } else {
        return o.error("type", "'" + type + "' is not dicom or dicomweb");
    }
    VOXSEG_ASSIGN_OR_RETURN(d.timeout_seconds,
                            o.number("timeout_seconds", 0.001, kDaySeconds, 60.0));
    return o.finish();
}

Status readRoot(JsonObject& o, const std::string& base_dir, NodeConfig& c) {
    VOXSEG_RETURN_IF_ERROR(readAeTitle(o, "ae_title", c.ae_title, std::string("VOXSEG")));
    VOXSEG_ASSIGN_OR_RETURN(int64_t port, o.integer("port", 1, 65535, 11112));
    c.port = static_cast<int>(port);
    VOXSEG_ASSIGN_OR_RETURN(c.accept_any_called_ae, o.boolean("accept_any_called_ae", false));
    VOXSEG_ASSIGN_OR_RETURN(auto callers, o.objects("allowed_callers"));
    for (auto& co : callers) {
        AllowedCaller a;
        VOXSEG_RETURN_IF_ERROR(readAeTitle(co, "ae_title", a.ae_title));
        VOXSEG_ASSIGN_OR_RETURN(a.host, co.string("host", std::string()));
        VOXSEG_RETURN_IF_ERROR(co.finish());
        c.allowed_callers.push_back(a);
    }
    VOXSEG_ASSIGN_OR_RETURN(int64_t assoc, o.integer("max_associations", 1, 256, 8));
    c.max_associations = static_cast<int>(assoc);
    VOXSEG_ASSIGN_OR_RETURN(c.spool_dir, o.string("spool_dir"));
    c.spool_dir = resolve(c.spool_dir, base_dir);
    VOXSEG_ASSIGN_OR_RETURN(c.quiet_seconds, o.number("quiet_seconds", 0, kDaySeconds, 5.0));
    VOXSEG_ASSIGN_OR_RETURN(c.interrupted_wait_seconds,
                            o.number("interrupted_wait_seconds", 0, kDaySeconds, 120.0));
    VOXSEG_ASSIGN_OR_RETURN(std::string group_by, o.string("group_by", std::string("series")));
    if (group_by == "series")
        c.group_by = GroupBy::kSeries;
    else if (group_by == "study")
        c.group_by = GroupBy::kStudy;
    else
        return o.error("group_by", "'" + group_by + "' is not series or study");
    VOXSEG_ASSIGN_OR_RETURN(c.unmatched_retention_hours,
                            o.number("unmatched_retention_hours", 0, 24.0 * 3660, 24.0));
    // Up to 2^40 MB (an exabyte): the byte count stays far inside uint64_t.
    VOXSEG_ASSIGN_OR_RETURN(double free_mb, o.number("min_free_mb", 0, 0x1p40, 5120.0));
    c.min_free_bytes = static_cast<uint64_t>(free_mb * 1024.0 * 1024.0);
    VOXSEG_ASSIGN_OR_RETURN(c.audit_log, o.string("audit_log", std::string()));
    c.audit_log = c.audit_log.empty() ? (fs::path(c.spool_dir) / "audit.jsonl").string()
                                      : resolve(c.audit_log, base_dir);
    VOXSEG_ASSIGN_OR_RETURN(int64_t http, o.integer("http_port", 0, 65535, 0));
    c.http_port = static_cast<int>(http);
    VOXSEG_ASSIGN_OR_RETURN(c.http_bind, o.string("http_bind", std::string("127.0.0.1")));
    VOXSEG_RETURN_IF_ERROR(readTls(o, "tls", base_dir, c.tls));
    VOXSEG_ASSIGN_OR_RETURN(c.spool_key_file, o.string("spool_key_file", std::string()));
    c.spool_key_file = resolve(c.spool_key_file, base_dir);
    VOXSEG_ASSIGN_OR_RETURN(c.trusted_keys, o.string("trusted_keys", std::string()));
    c.trusted_keys = resolve(c.trusted_keys, base_dir);
    VOXSEG_ASSIGN_OR_RETURN(c.require_signed_models, o.boolean("require_signed_models", false));
    if (c.require_signed_models && c.trusted_keys.empty())
        return o.error("require_signed_models", "needs trusted_keys (a file of public keys)");
    {
        VOXSEG_ASSIGN_OR_RETURN(JsonObject s, o.object("send", true));
        VOXSEG_ASSIGN_OR_RETURN(int64_t attempts, s.integer("attempts", 1, 100, 4));
        c.send.attempts = static_cast<int>(attempts);
        VOXSEG_ASSIGN_OR_RETURN(c.send.initial_delay_seconds,
                                s.number("initial_delay_seconds", 0, kDaySeconds, 2.0));
        VOXSEG_RETURN_IF_ERROR(s.finish());
    }
    {
        VOXSEG_ASSIGN_OR_RETURN(JsonObject dests, o.object("destinations", true));
        for (const auto& name : dests.keys()) {
            VOXSEG_ASSIGN_OR_RETURN(JsonObject d, dests.object(name));
            Destination dest;
            VOXSEG_RETURN_IF_ERROR(readDestination(d, name, base_dir, dest));
            c.destinations.push_back(dest);
        }
    }
    VOXSEG_ASSIGN_OR_RETURN(auto routes, o.objects("routes"));
    if (routes.empty()) return o.error("routes", "needs at least one route");
    std::set<std::string> names;
    for (size_t i = 0; i < routes.size(); ++i) {
        Route r;
        VOXSEG_RETURN_IF_ERROR(readRoute(routes[i], i, base_dir, r));
        if (!names.insert(r.name).second)
            return routes[i].error("name", "'" + r.name + "' is used by two routes");
        for (const auto& d : r.send_to)
            if (!c.destination(d))
                return routes[i].error("send_to", "'" + d + "' is not one of the destinations");
        c.routes.push_back(std::move(r));
    }
    return o.finish();
}

}  // namespace

const Destination* NodeConfig::destination(const std::string& name) const {
    for (const auto& d : destinations)
        if (d.name == name) return &d;
    return nullptr;
}

Result<NodeConfig> parseNodeConfig(const std::string& text, const std::string& file,
                                   const std::string& base_dir) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range.406
        return invalidArgument(std::string("not valid JSON: ") + e.what(), file);
    }
    VOXSEG_ASSIGN_OR_RETURN(JsonObject root,
                            JsonObject::wrap(j, "", {.subject = file, .help = "see docs/node.md"}));
    NodeConfig c;
    c.file = file;
    VOXSEG_RETURN_IF_ERROR(readRoot(root, base_dir, c));
    return c;
}

Result<NodeConfig> loadNodeConfig(const std::string& path) {
    VOXSEG_ASSIGN_OR_RETURN(std::string text, readFileBytes(path, "the node configuration"));
    const std::string base = fs::absolute(path).parent_path().string();
    return parseNodeConfig(text, path, base);
}

}  // namespace voxseg::node
