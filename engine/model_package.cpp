#include "engine/model_package.h"

#include "engine/onnx_import.h"
#include "engine/sha256.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace voxseg::engine {
namespace {

using nlohmann::json;

const char* jsonTypeName(const json& j) {
    if (j.is_null()) return "null";
    if (j.is_boolean()) return "a boolean";
    if (j.is_number_integer() || j.is_number_unsigned()) return "an integer";
    if (j.is_number()) return "a number";
    if (j.is_string()) return "a string";
    if (j.is_array()) return "an array";
    return "an object";
}

std::string shortDump(const json& j) {
    std::string s = j.dump();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

// Reads typed values out of model.json, remembering the first error. Every accessor names the
// key path ("labels[2].color") and what was expected.
class Reader {
  public:
    explicit Reader(std::string source) : source_(std::move(source)) {}

    bool ok() const { return status_.isOk(); }
    const Status& status() const { return status_; }

    void fail(const std::string& key, const std::string& what) {
        if (!status_.isOk()) return;
        status_ = invalidArgument(
            "model.json key '" + key + "': " + what + " (see docs/model-package.md for the format)",
            source_);
    }
    void failType(const std::string& key, const std::string& expected, const json& got) {
        fail(key, "expected " + expected + ", got " + jsonTypeName(got) + " " + shortDump(got));
    }

    // The member, or nullptr (with an error when required).
    const json* member(const json& obj, const std::string& prefix, const std::string& key,
                       bool required) {
        auto it = obj.find(key);
        if (it == obj.end()) {
            if (required) fail(join(prefix, key), "missing (required)");
            return nullptr;
        }
        return &*it;
    }

    // Rejects keys not in `allowed` (typos such as "overlapp" would otherwise be ignored);
    // keys starting with '_' are free for comments and extensions.
    void onlyKeys(const json& obj, const std::string& prefix,
                  std::initializer_list<const char*> allowed) {
        for (auto it = obj.begin(); it != obj.end(); ++it) {
            const std::string& k = it.key();
            if (!k.empty() && k[0] == '_') continue;
            if (std::none_of(allowed.begin(), allowed.end(),
                             [&](const char* a) { return k == a; })) {
                std::string list;
                for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
                fail(join(prefix, k), "unknown key; allowed here: " + list +
                                          " (prefix a key with '_' for comments)");
                return;
            }
        }
    }

    std::string string(const json& j, const std::string& key, bool allow_empty = false) {
        if (!j.is_string()) {
            failType(key, "a string", j);
            return {};
        }
        std::string s = j.get<std::string>();
        if (s.empty() && !allow_empty) fail(key, "must not be empty");
        return s;
    }
    double number(const json& j, const std::string& key) {
        if (!j.is_number()) {
            failType(key, "a number", j);
            return 0.0;
        }
        const double v = j.get<double>();
        if (!std::isfinite(v)) fail(key, "must be finite");
        return v;
    }
    int64_t integer(const json& j, const std::string& key, int64_t lo, int64_t hi) {
        if (!j.is_number_integer() && !j.is_number_unsigned()) {
            failType(key, "an integer", j);
            return 0;
        }
        if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(hi)) {
            fail(key, "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                          ", got " + shortDump(j));
            return 0;
        }
        const int64_t v = j.get<int64_t>();
        if (v < lo || v > hi)
            fail(key, "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                          ", got " + std::to_string(v));
        return v;
    }
    bool boolean(const json& j, const std::string& key) {
        if (!j.is_boolean()) {
            failType(key, "true or false", j);
            return false;
        }
        return j.get<bool>();
    }
    bool array(const json& j, const std::string& key, const std::string& of) {
        if (!j.is_array()) {
            failType(key, "an array of " + of, j);
            return false;
        }
        return true;
    }
    bool object(const json& j, const std::string& key) {
        if (!j.is_object()) {
            failType(key, "an object", j);
            return false;
        }
        return true;
    }

    static std::string join(const std::string& prefix, const std::string& key) {
        return prefix.empty() ? key : prefix + "." + key;
    }
    static std::string index(const std::string& key, size_t i) {
        return key + "[" + std::to_string(i) + "]";
    }

  private:
    std::string source_;
    Status status_;
};

bool isHex64(const std::string& s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

bool validOrientation(const std::string& code) {
    if (code.size() != 3) return false;
    // One letter from each of the pairs R/L, A/P, S/I, in any order.
    int seen[3] = {0, 0, 0};
    for (char c : code) {
        switch (c) {
            case 'R':
            case 'L':
                ++seen[0];
                break;
            case 'A':
            case 'P':
                ++seen[1];
                break;
            case 'S':
            case 'I':
                ++seen[2];
                break;
            default:
                return false;
        }
    }
    return seen[0] == 1 && seen[1] == 1 && seen[2] == 1;
}

void readNormalization(Reader& r, const json& j, const std::string& key, Normalization& n) {
    if (!r.object(j, key)) return;
    const json* scheme = r.member(j, key, "scheme", true);
    if (!scheme) return;
    const std::string s = r.string(*scheme, Reader::join(key, "scheme"));
    if (!r.ok()) return;
    if (s == "ct") {
        n.scheme = Normalization::Scheme::kCT;
        r.onlyKeys(j, key, {"scheme", "clip", "mean", "std"});
        const json* clip = r.member(j, key, "clip", true);
        const json* mean = r.member(j, key, "mean", true);
        const json* std_dev = r.member(j, key, "std", true);
        if (!r.ok()) return;
        const std::string clip_key = Reader::join(key, "clip");
        if (!clip->is_array() || clip->size() != 2) {
            r.failType(clip_key, "[low, high]", *clip);
            return;
        }
        n.clip_low = r.number((*clip)[0], Reader::index(clip_key, 0));
        n.clip_high = r.number((*clip)[1], Reader::index(clip_key, 1));
        if (r.ok() && !(n.clip_low < n.clip_high))
            r.fail(clip_key, "low must be below high, got " + shortDump(*clip));
        n.mean = r.number(*mean, Reader::join(key, "mean"));
        n.std = r.number(*std_dev, Reader::join(key, "std"));
        if (r.ok() && !(n.std > 0.0))
            r.fail(Reader::join(key, "std"), "must be > 0, got " + shortDump(*std_dev));
    } else if (s == "zscore") {
        n.scheme = Normalization::Scheme::kZScore;
        r.onlyKeys(j, key, {"scheme", "mask"});
        if (const json* mask = r.member(j, key, "mask", false)) {
            const std::string m = r.string(*mask, Reader::join(key, "mask"));
            if (r.ok() && m != "nonzero")
                r.fail(Reader::join(key, "mask"), "expected \"nonzero\", got \"" + m + "\"");
            n.nonzero_mask = true;
        }
    } else if (s == "none") {
        n.scheme = Normalization::Scheme::kNone;
        r.onlyKeys(j, key, {"scheme"});
    } else {
        r.fail(Reader::join(key, "scheme"),
               "expected \"ct\", \"zscore\" or \"none\", got \"" + s + "\"");
    }
}

std::optional<CodedConcept> readConcept(Reader& r, const json& j, const std::string& key) {
    if (!r.object(j, key)) return std::nullopt;
    r.onlyKeys(j, key, {"code", "scheme", "meaning"});
    CodedConcept c;
    const json* code = r.member(j, key, "code", true);
    const json* scheme = r.member(j, key, "scheme", true);
    const json* meaning = r.member(j, key, "meaning", true);
    if (!r.ok()) return std::nullopt;
    c.code = r.string(*code, Reader::join(key, "code"));
    c.scheme = r.string(*scheme, Reader::join(key, "scheme"));
    c.meaning = r.string(*meaning, Reader::join(key, "meaning"));
    return c;
}

json conceptJson(const CodedConcept& c) {
    return json{{"code", c.code}, {"scheme", c.scheme}, {"meaning", c.meaning}};
}

}  // namespace

const char* normalizationSchemeName(Normalization::Scheme scheme) {
    switch (scheme) {
        case Normalization::Scheme::kCT:
            return "ct";
        case Normalization::Scheme::kZScore:
            return "zscore";
        case Normalization::Scheme::kNone:
            return "none";
    }
    return "?";
}

int64_t ModelPackage::outputChannels() const {
    const auto n = static_cast<int64_t>(labels.size());
    return output == OutputKind::kSoftmax ? n + 1 : n;
}

std::vector<int> ModelPackage::channelLabelValues() const {
    std::vector<int> values;
    if (output == OutputKind::kSoftmax) values.push_back(0);
    for (const auto& l : labels) values.push_back(l.value);
    return values;
}

SlidingWindowOptions ModelPackage::slidingWindowOptions() const {
    SlidingWindowOptions o;
    o.patch_size = patch_size;
    o.overlap = inference.overlap;
    o.gaussian = inference.gaussian;
    o.sigma_scale = inference.gaussian_sigma_scale;
    o.mirror_axes = inference.mirror_axes;
    o.convention = inference.convention;
    return o;
}

Result<ModelPackage> parseModelPackage(const std::string& json_text, const std::string& source,
                                       const std::filesystem::path& folder) {
    json root;
    try {
        root = json::parse(json_text);
    } catch (const json::parse_error& e) {
        // e.what() carries the byte position: "[json.exception.parse_error.101] parse error at
        // line 3, column 5: ...".
        return corruptData(std::string("model.json is not valid JSON: ") + e.what(), source);
    }
    Reader r(source);
    if (!root.is_object())
        return invalidArgument(
            std::string("model.json must hold a JSON object, got ") + jsonTypeName(root), source);
    r.onlyKeys(root, "",
               {"format_version", "name", "version", "description", "license", "attribution",
                "channels", "spacing_mm", "patch_size", "axis_order", "orientation", "labels",
                "output", "inference", "sha256", "models"});
    ModelPackage p;
    p.folder = folder;

    if (const json* v = r.member(root, "", "format_version", false)) {
        p.format_version = static_cast<int>(r.integer(*v, "format_version", 1, 1000000));
        if (r.ok() && p.format_version > 1)
            return unsupported("model.json has format_version " + std::to_string(p.format_version) +
                                   "; this voxseg reads version 1: update voxseg",
                               source);
    }
    if (const json* v = r.member(root, "", "name", true)) p.name = r.string(*v, "name");
    if (const json* v = r.member(root, "", "version", true)) p.version = r.string(*v, "version");
    if (const json* v = r.member(root, "", "description", true))
        p.description = r.string(*v, "description", true);
    if (const json* v = r.member(root, "", "license", true)) p.license = r.string(*v, "license");
    if (const json* v = r.member(root, "", "attribution", false))
        p.attribution = r.string(*v, "attribution", true);

    if (const json* v = r.member(root, "", "channels", true);
        v && r.array(*v, "channels", "{modality, normalization} objects")) {
        if (v->empty()) r.fail("channels", "must list at least one input channel");
        for (size_t i = 0; i < v->size() && r.ok(); ++i) {
            const std::string key = Reader::index("channels", i);
            const json& c = (*v)[i];
            if (!r.object(c, key)) break;
            r.onlyKeys(c, key, {"modality", "normalization"});
            ChannelSpec ch;
            if (const json* m = r.member(c, key, "modality", true))
                ch.modality = r.string(*m, Reader::join(key, "modality"));
            if (const json* n = r.member(c, key, "normalization", true))
                readNormalization(r, *n, Reader::join(key, "normalization"), ch.normalization);
            p.channels.push_back(ch);
        }
    }

    if (const json* v = r.member(root, "", "patch_size", true);
        v && r.array(*v, "patch_size", "positive integers")) {
        for (size_t i = 0; i < v->size() && r.ok(); ++i)
            p.patch_size.push_back(r.integer((*v)[i], Reader::index("patch_size", i), 1, 4096));
        if (r.ok() && (p.patch_size.size() < 2 || p.patch_size.size() > 3))
            r.fail("patch_size", "expected 2 or 3 entries (2D or 3D network), got " +
                                     std::to_string(p.patch_size.size()));
    }
    if (const json* v = r.member(root, "", "spacing_mm", true);
        v && r.array(*v, "spacing_mm", "positive numbers")) {
        for (size_t i = 0; i < v->size() && r.ok(); ++i) {
            const double s = r.number((*v)[i], Reader::index("spacing_mm", i));
            if (r.ok() && !(s > 0.0))
                r.fail(Reader::index("spacing_mm", i), "must be > 0, got " + shortDump((*v)[i]));
            p.spacing_mm.push_back(s);
        }
        if (r.ok() && p.spacing_mm.size() != p.patch_size.size())
            r.fail("spacing_mm", "has " + std::to_string(p.spacing_mm.size()) +
                                     " entries but patch_size has " +
                                     std::to_string(p.patch_size.size()) +
                                     ": both list the network's spatial axes");
    }
    if (const json* v = r.member(root, "", "axis_order", true)) {
        const std::string s = r.string(*v, "axis_order");
        if (s == "zyx") {
            p.axis_order = AxisOrder::kZyx;
        } else if (s == "xyz") {
            p.axis_order = AxisOrder::kXyz;
        } else if (r.ok()) {
            r.fail("axis_order",
                   "expected \"zyx\" (nnU-Net arrays) or \"xyz\" (MONAI), got \"" + s + "\"");
        }
    }
    if (const json* v = r.member(root, "", "orientation", true)) {
        p.orientation = r.string(*v, "orientation");
        if (r.ok() && p.orientation != "native" && !validOrientation(p.orientation))
            r.fail("orientation",
                   "expected \"native\" or a code of one letter from each of R/L, "
                   "A/P, S/I such as \"RAS\" or \"LPS\", got \"" +
                       p.orientation + "\"");
    }

    if (const json* v = r.member(root, "", "labels", true);
        v && r.array(*v, "labels", "{value, name, color, ...} objects")) {
        if (v->empty()) r.fail("labels", "must list at least one label");
        std::set<int> values;
        std::set<std::string> names;
        for (size_t i = 0; i < v->size() && r.ok(); ++i) {
            const std::string key = Reader::index("labels", i);
            const json& l = (*v)[i];
            if (!r.object(l, key)) break;
            r.onlyKeys(l, key, {"value", "name", "color", "category", "type"});
            LabelSpec label;
            if (const json* x = r.member(l, key, "value", true))
                label.value = static_cast<int>(r.integer(*x, Reader::join(key, "value"), 1, 32767));
            if (const json* x = r.member(l, key, "name", true))
                label.name = r.string(*x, Reader::join(key, "name"));
            if (const json* x = r.member(l, key, "color", true)) {
                const std::string ckey = Reader::join(key, "color");
                if (!x->is_array() || x->size() != 3) {
                    r.failType(ckey, "[r, g, b] with values 0..255", *x);
                } else {
                    for (size_t c = 0; c < 3; ++c)
                        label.color[c] = static_cast<uint8_t>(
                            r.integer((*x)[c], Reader::index(ckey, c), 0, 255));
                }
            }
            if (const json* x = r.member(l, key, "category", false))
                label.category = readConcept(r, *x, Reader::join(key, "category"));
            if (const json* x = r.member(l, key, "type", false))
                label.type = readConcept(r, *x, Reader::join(key, "type"));
            if (!r.ok()) break;
            if (!values.insert(label.value).second)
                r.fail(Reader::join(key, "value"),
                       "label value " + std::to_string(label.value) +
                           " is used twice: each label needs its own value");
            if (!names.insert(label.name).second)
                r.fail(Reader::join(key, "name"),
                       "label name \"" + label.name + "\" is used twice");
            p.labels.push_back(label);
        }
    }
    if (const json* v = r.member(root, "", "output", true)) {
        const std::string s = r.string(*v, "output");
        if (s == "softmax") {
            p.output = OutputKind::kSoftmax;
        } else if (s == "sigmoid") {
            p.output = OutputKind::kSigmoid;
        } else if (r.ok()) {
            r.fail("output",
                   "expected \"softmax\" (channel 0 = background) or \"sigmoid\" (one "
                   "channel per label), got \"" +
                       s + "\"");
        }
    }

    if (const json* v = r.member(root, "", "inference", false); v && r.object(*v, "inference")) {
        r.onlyKeys(*v, "inference",
                   {"overlap", "gaussian", "gaussian_sigma_scale", "mirror_axes", "convention"});
        InferenceSpec& inf = p.inference;
        if (const json* x = r.member(*v, "inference", "overlap", false)) {
            inf.overlap = r.number(*x, "inference.overlap");
            if (r.ok() && !(inf.overlap >= 0.0 && inf.overlap < 1.0))
                r.fail("inference.overlap", "must be in [0, 1), got " + shortDump(*x));
        }
        if (const json* x = r.member(*v, "inference", "gaussian", false))
            inf.gaussian = r.boolean(*x, "inference.gaussian");
        if (const json* x = r.member(*v, "inference", "gaussian_sigma_scale", false)) {
            inf.gaussian_sigma_scale = r.number(*x, "inference.gaussian_sigma_scale");
            if (r.ok() && !(inf.gaussian_sigma_scale > 0.0 && inf.gaussian_sigma_scale <= 10.0))
                r.fail("inference.gaussian_sigma_scale",
                       "must be in (0, 10], got " + shortDump(*x));
        }
        if (const json* x = r.member(*v, "inference", "mirror_axes", false);
            x && r.array(*x, "inference.mirror_axes", "spatial axis indices")) {
            const int64_t rank = static_cast<int64_t>(p.patch_size.size());
            for (size_t i = 0; i < x->size() && r.ok(); ++i) {
                const std::string key = Reader::index("inference.mirror_axes", i);
                const int axis = static_cast<int>(r.integer((*x)[i], key, 0, 2));
                if (!r.ok()) break;
                if (rank > 0 && axis >= rank)
                    r.fail(key, "axis " + std::to_string(axis) + " is not a spatial axis of the " +
                                    std::to_string(rank) + "D patch");
                if (std::find(inf.mirror_axes.begin(), inf.mirror_axes.end(), axis) !=
                    inf.mirror_axes.end())
                    r.fail(key, "axis " + std::to_string(axis) + " is listed twice");
                inf.mirror_axes.push_back(axis);
            }
        }
        if (const json* x = r.member(*v, "inference", "convention", false)) {
            const std::string s = r.string(*x, "inference.convention");
            if (r.ok()) {
                auto c = parseWindowConvention(s);
                if (c.isOk()) {
                    inf.convention = *c;
                } else {
                    r.fail("inference.convention",
                           "expected \"nnunet\" or \"monai\", got \"" + s + "\"");
                }
            }
        }
    }

    const json* sha = r.member(root, "", "sha256", false);
    const json* models = r.member(root, "", "models", false);
    if (r.ok()) {
        if (sha && models) {
            r.fail("models",
                   "give either sha256 (for model.onnx) or models (an ensemble), not both");
        } else if (sha) {
            const std::string h = r.string(*sha, "sha256");
            if (r.ok() && !isHex64(h))
                r.fail(
                    "sha256",
                    "expected 64 lower-case hex digits (sha256sum model.onnx), got \"" + h + "\"");
            p.models.push_back({"model.onnx", h});
        } else if (models) {
            if (r.array(*models, "models", "{file, sha256} objects") && models->empty())
                r.fail("models", "must list at least one ONNX file");
            for (size_t i = 0; r.ok() && i < models->size(); ++i) {
                const std::string key = Reader::index("models", i);
                const json& m = (*models)[i];
                if (!r.object(m, key)) break;
                r.onlyKeys(m, key, {"file", "sha256"});
                ModelFile f;
                if (const json* x = r.member(m, key, "file", true))
                    f.file = r.string(*x, Reader::join(key, "file"));
                if (const json* x = r.member(m, key, "sha256", true))
                    f.sha256 = r.string(*x, Reader::join(key, "sha256"));
                if (!r.ok()) break;
                const std::filesystem::path fp(f.file);
                if (fp.is_absolute() || fp.has_parent_path() || f.file == "." || f.file == "..")
                    r.fail(Reader::join(key, "file"),
                           "must be a file name inside the package folder, got \"" + f.file + "\"");
                else if (!isHex64(f.sha256))
                    r.fail(Reader::join(key, "sha256"),
                           "expected 64 lower-case hex digits, got \"" + f.sha256 + "\"");
                p.models.push_back(f);
            }
        } else {
            r.fail("sha256",
                   "missing (required): the sha256 of model.onnx (or \"models\" for an "
                   "ensemble)");
        }
    }
    if (!r.ok()) return r.status();
    return p;
}

Result<ModelPackage> readModelPackage(const std::filesystem::path& folder) {
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec))
        return notFound(
            "model package folder not found (expected a folder with model.json and "
            "model.onnx)",
            folder.string());
    const auto json_path = folder / "model.json";
    if (!std::filesystem::is_regular_file(json_path, ec))
        return notFound("model package has no model.json", folder.string());
    const auto size = std::filesystem::file_size(json_path, ec);
    if (ec) return ioError("cannot read model.json: " + ec.message(), json_path.string());
    if (size > kMaxModelJsonBytes)
        return invalidArgument("model.json is " + std::to_string(size) +
                                   " bytes, more than the 4 MiB a model description needs",
                               json_path.string());
    std::ifstream in(json_path, std::ios::binary);
    if (!in) return ioError("cannot open model.json for reading", json_path.string());
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return ioError("reading model.json failed", json_path.string());
    return parseModelPackage(text.str(), json_path.string(), folder);
}

Status verifyModelFiles(const ModelPackage& package) {
    for (const ModelFile& f : package.models) {
        const auto path = package.folder / f.file;
        auto hash = sha256File(path);
        if (!hash.isOk()) {
            if (hash.status().code() == StatusCode::kNotFound)
                return notFound(f.file + " named in model.json is missing from the package",
                                path.string());
            return hash.status();
        }
        if (*hash != f.sha256)
            return corruptData(f.file +
                                   " does not match model.json's sha256: the package is "
                                   "damaged or was edited (expected " +
                                   f.sha256 + ", file has " + *hash + ")",
                               path.string());
    }
    return Status::ok();
}

std::string modelPackageToJson(const ModelPackage& p) {
    json j;
    j["format_version"] = p.format_version;
    j["name"] = p.name;
    j["version"] = p.version;
    j["description"] = p.description;
    j["license"] = p.license;
    if (!p.attribution.empty()) j["attribution"] = p.attribution;
    json channels = json::array();
    for (const auto& c : p.channels) {
        json n{{"scheme", normalizationSchemeName(c.normalization.scheme)}};
        if (c.normalization.scheme == Normalization::Scheme::kCT) {
            n["clip"] = {c.normalization.clip_low, c.normalization.clip_high};
            n["mean"] = c.normalization.mean;
            n["std"] = c.normalization.std;
        } else if (c.normalization.scheme == Normalization::Scheme::kZScore &&
                   c.normalization.nonzero_mask) {
            n["mask"] = "nonzero";
        }
        channels.push_back({{"modality", c.modality}, {"normalization", n}});
    }
    j["channels"] = channels;
    j["spacing_mm"] = p.spacing_mm;
    j["patch_size"] = p.patch_size;
    j["axis_order"] = p.axis_order == AxisOrder::kZyx ? "zyx" : "xyz";
    j["orientation"] = p.orientation;
    json labels = json::array();
    for (const auto& l : p.labels) {
        json lj{
            {"value", l.value}, {"name", l.name}, {"color", {l.color[0], l.color[1], l.color[2]}}};
        if (l.category) lj["category"] = conceptJson(*l.category);
        if (l.type) lj["type"] = conceptJson(*l.type);
        labels.push_back(lj);
    }
    j["labels"] = labels;
    j["output"] = p.output == OutputKind::kSoftmax ? "softmax" : "sigmoid";
    j["inference"] = {{"overlap", p.inference.overlap},
                      {"gaussian", p.inference.gaussian},
                      {"gaussian_sigma_scale", p.inference.gaussian_sigma_scale},
                      {"mirror_axes", p.inference.mirror_axes},
                      {"convention", windowConventionName(p.inference.convention)}};
    if (p.models.size() == 1 && p.models[0].file == "model.onnx") {
        j["sha256"] = p.models[0].sha256;
    } else {
        json models = json::array();
        for (const auto& m : p.models) models.push_back({{"file", m.file}, {"sha256", m.sha256}});
        j["models"] = models;
    }
    return j.dump(2) + "\n";
}

Result<LoadedModel> loadModelPackage(const std::filesystem::path& folder) {
    LoadedModel model;
    VOXSEG_ASSIGN_OR_RETURN(model.package, readModelPackage(folder));
    const ModelPackage& p = model.package;
    VOXSEG_RETURN_IF_ERROR(verifyModelFiles(p));
    Shape input = {1, static_cast<int64_t>(p.channels.size())};
    input.insert(input.end(), p.patch_size.begin(), p.patch_size.end());
    Shape expected_output = input;
    expected_output[1] = p.outputChannels();
    for (const ModelFile& f : p.models) {
        const auto path = folder / f.file;
        OnnxImportOptions options;
        options.input_shapes = {input};
        auto graph = importOnnx(path, options);
        if (!graph.isOk())
            return graph.status().withContext(f.file + " (for input " + shapeToString(input) +
                                              " from model.json's channels and patch_size): ");
        if (graph->inputs.size() != 1)
            return unsupported(f.file + " has " + std::to_string(graph->inputs.size()) +
                                   " inputs; voxseg runs networks with one input (the channels "
                                   "stacked)",
                               path.string());
        if (graph->outputs.empty()) return corruptData(f.file + " has no outputs", path.string());
        const Shape& out = graph->values[graph->outputs[0]].shape;
        if (out != expected_output) {
            const std::string what =
                p.output == OutputKind::kSoftmax
                    ? "softmax: background + " + std::to_string(p.labels.size()) + " labels"
                    : "sigmoid: one channel per label, " + std::to_string(p.labels.size());
            return invalidArgument(f.file + " produces " + shapeToString(out) + " for input " +
                                       shapeToString(input) + ", but model.json expects " +
                                       shapeToString(expected_output) + " (" + what +
                                       ", same spatial shape as the patch)",
                                   path.string());
        }
        model.graphs.push_back(std::move(graph).value());
    }
    return model;
}

Result<std::unique_ptr<SlidingWindow>> createSlidingWindow(Backend& backend,
                                                           const LoadedModel& model, int batch,
                                                           const CompileOptions& compile,
                                                           DType accumulator) {
    SlidingWindowOptions options = model.package.slidingWindowOptions();
    options.batch = batch;
    options.accumulator = accumulator;
    options.compile = compile;
    std::vector<const Graph*> graphs;
    for (const Graph& g : model.graphs) graphs.push_back(&g);
    auto sw = SlidingWindow::create(backend, graphs,
                                    static_cast<int64_t>(model.package.channels.size()), options);
    if (!sw.isOk()) return sw.status().withContext("model " + model.package.name + ": ");
    return sw;
}

}  // namespace voxseg::engine
