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

// [a, b] with a < b (numbers); false (error recorded) otherwise.
bool readPair(Reader& r, const json& j, const std::string& key, const std::string& what, double& a,
              double& b, bool ordered = true) {
    if (!j.is_array() || j.size() != 2) {
        r.failType(key, what, j);
        return false;
    }
    a = r.number(j[0], Reader::index(key, 0));
    b = r.number(j[1], Reader::index(key, 1));
    if (r.ok() && ordered && !(a < b)) r.fail(key, "low must be below high, got " + shortDump(j));
    return r.ok();
}

// `stages`: version 2 (percentile's "percentiles_of" names a stage).
void readNormalization(Reader& r, const json& j, const std::string& key, Normalization& n,
                       bool stages) {
    if (!r.object(j, key)) return;
    const json* scheme = r.member(j, key, "scheme", true);
    if (!scheme) return;
    const std::string s = r.string(*scheme, Reader::join(key, "scheme"));
    if (!r.ok()) return;
    auto readRangeAndAffine = [&] {
        if (const json* x = r.member(j, key, "range", false)) {
            n.has_range = readPair(r, *x, Reader::join(key, "range"), "[low, high]", n.range_low,
                                   n.range_high);
        }
        if (const json* x = r.member(j, key, "affine", false)) {
            readPair(r, *x, Reader::join(key, "affine"), "[scale, shift]", n.affine_scale,
                     n.affine_shift, false);
        }
    };
    if (s == "ct") {
        n.scheme = Normalization::Scheme::kCT;
        r.onlyKeys(j, key, {"scheme", "clip", "mean", "std"});
        const json* clip = r.member(j, key, "clip", true);
        const json* mean = r.member(j, key, "mean", true);
        const json* std_dev = r.member(j, key, "std", true);
        if (!r.ok()) return;
        const std::string clip_key = Reader::join(key, "clip");
        if (!readPair(r, *clip, clip_key, "[low, high]", n.clip_low, n.clip_high)) return;
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
    } else if (s == "percentile") {
        n.scheme = Normalization::Scheme::kPercentile;
        if (stages)
            r.onlyKeys(j, key,
                       {"scheme", "percentiles", "percentiles_of", "range", "zscore", "std_ddof",
                        "affine"});
        else
            r.onlyKeys(j, key, {"scheme", "percentiles", "range", "zscore", "std_ddof", "affine"});
        if (const json* x = r.member(j, key, "percentiles", true)) {
            const std::string pkey = Reader::join(key, "percentiles");
            if (readPair(r, *x, pkey, "[low, high] in percent", n.percentile_low,
                         n.percentile_high) &&
                !(n.percentile_low >= 0.0 && n.percentile_high <= 100.0))
                r.fail(pkey, "percentiles must lie in [0, 100], got " + shortDump(*x));
        }
        if (const json* x = r.member(j, key, "percentiles_of", false))
            n.percentiles_of = r.string(*x, Reader::join(key, "percentiles_of"));
        if (const json* x = r.member(j, key, "zscore", false))
            n.zscore = r.boolean(*x, Reader::join(key, "zscore"));
        if (const json* x = r.member(j, key, "std_ddof", false))
            n.std_ddof = static_cast<int>(r.integer(*x, Reader::join(key, "std_ddof"), 0, 1));
        readRangeAndAffine();
    } else if (s == "window") {
        n.scheme = Normalization::Scheme::kWindow;
        r.onlyKeys(j, key, {"scheme", "window", "range", "affine"});
        if (const json* x = r.member(j, key, "window", true))
            readPair(r, *x, Reader::join(key, "window"), "[low, high]", n.clip_low, n.clip_high);
        readRangeAndAffine();
        n.has_range = true;  // [0, 1] unless given
    } else {
        r.fail(Reader::join(key, "scheme"),
               "expected \"ct\", \"zscore\", \"none\", \"percentile\" or \"window\", got \"" + s +
                   "\"");
    }
}

// `inference` (version 1 top level, version 2 per stage): sliding-window settings; `rank` is
// the patch's (mirror axes must be spatial axes of it).
void readInference(Reader& r, const json& v, const std::string& ikey, int64_t rank,
                   InferenceSpec& inf) {
    if (!r.object(v, ikey)) return;
    r.onlyKeys(v, ikey,
               {"overlap", "gaussian", "gaussian_sigma_scale", "mirror_axes", "convention"});
    if (const json* x = r.member(v, ikey, "overlap", false)) {
        inf.overlap = r.number(*x, Reader::join(ikey, "overlap"));
        if (r.ok() && !(inf.overlap >= 0.0 && inf.overlap < 1.0))
            r.fail(Reader::join(ikey, "overlap"), "must be in [0, 1), got " + shortDump(*x));
    }
    if (const json* x = r.member(v, ikey, "gaussian", false))
        inf.gaussian = r.boolean(*x, Reader::join(ikey, "gaussian"));
    if (const json* x = r.member(v, ikey, "gaussian_sigma_scale", false)) {
        inf.gaussian_sigma_scale = r.number(*x, Reader::join(ikey, "gaussian_sigma_scale"));
        if (r.ok() && !(inf.gaussian_sigma_scale > 0.0 && inf.gaussian_sigma_scale <= 10.0))
            r.fail(Reader::join(ikey, "gaussian_sigma_scale"),
                   "must be in (0, 10], got " + shortDump(*x));
    }
    if (const json* x = r.member(v, ikey, "mirror_axes", false);
        x && r.array(*x, Reader::join(ikey, "mirror_axes"), "spatial axis indices")) {
        for (size_t i = 0; i < x->size() && r.ok(); ++i) {
            const std::string key = Reader::index(Reader::join(ikey, "mirror_axes"), i);
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
    if (const json* x = r.member(v, ikey, "convention", false)) {
        const std::string s = r.string(*x, Reader::join(ikey, "convention"));
        if (r.ok()) {
            auto c = parseWindowConvention(s);
            if (c.isOk()) {
                inf.convention = *c;
            } else {
                r.fail(Reader::join(ikey, "convention"),
                       "expected \"nnunet\" or \"monai\", got \"" + s + "\"");
            }
        }
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

// Reads an integer array of `rank` 2..3 entries within [lo, hi] into `out`.
void readIntArray(Reader& r, const json& j, const std::string& key, int64_t lo, int64_t hi,
                  std::vector<int64_t>& out) {
    if (!r.array(j, key, "integers")) return;
    for (size_t i = 0; i < j.size() && r.ok(); ++i)
        out.push_back(r.integer(j[i], Reader::index(key, i), lo, hi));
    if (r.ok() && (out.size() < 2 || out.size() > 3))
        r.fail(key, "expected 2 or 3 entries (the network's spatial axes), got " +
                        std::to_string(out.size()));
}

void readStageResize(Reader& r, const json& st, const std::string& key, StageSpec& stage) {
    const json* shape = r.member(st, key, "shape", false);
    const json* spacing = r.member(st, key, "spacing_mm", false);
    const json* patch = r.member(st, key, "patch_size", false);
    if (shape && spacing) {
        r.fail(Reader::join(key, "spacing_mm"),
               "give either shape (a fixed network shape) or spacing_mm (with patch_size), "
               "not both");
        return;
    }
    if (!shape && !spacing) {
        r.fail(Reader::join(key, "shape"),
               "missing (required): a fixed \"shape\", or \"spacing_mm\" with \"patch_size\"");
        return;
    }
    if (shape) {
        if (patch) {
            r.fail(Reader::join(key, "patch_size"),
                   "a stage with a fixed shape runs the whole shape as one patch; drop patch_size");
            return;
        }
        readIntArray(r, *shape, Reader::join(key, "shape"), 1, 4096, stage.shape);
        stage.interpolation = Interpolation::kNearestExact;
    } else {
        if (!patch) {
            r.fail(Reader::join(key, "patch_size"), "missing (required with spacing_mm)");
            return;
        }
        readIntArray(r, *patch, Reader::join(key, "patch_size"), 1, 4096, stage.patch_size);
        const std::string skey = Reader::join(key, "spacing_mm");
        if (!r.ok() || !r.array(*spacing, skey, "positive numbers")) return;
        for (size_t i = 0; i < spacing->size() && r.ok(); ++i) {
            const double v = r.number((*spacing)[i], Reader::index(skey, i));
            if (r.ok() && !(v > 0.0))
                r.fail(Reader::index(skey, i), "must be > 0, got " + shortDump((*spacing)[i]));
            stage.spacing_mm.push_back(v);
        }
        if (r.ok() && stage.spacing_mm.size() != stage.patch_size.size())
            r.fail(skey, "has " + std::to_string(stage.spacing_mm.size()) +
                             " entries but patch_size has " +
                             std::to_string(stage.patch_size.size()));
        stage.interpolation = Interpolation::kSpline3;
    }
    if (const json* x = r.member(st, key, "interpolation", false)) {
        const std::string s = r.string(*x, Reader::join(key, "interpolation"));
        if (s == "nearest-exact")
            stage.interpolation = Interpolation::kNearestExact;
        else if (s == "linear")
            stage.interpolation = Interpolation::kLinear;
        else if (s == "spline3")
            stage.interpolation = Interpolation::kSpline3;
        else if (r.ok())
            r.fail(Reader::join(key, "interpolation"),
                   "expected \"nearest-exact\" (PyTorch's), \"linear\" or \"spline3\" (order-3 "
                   "B-spline, nnU-Net's), got \"" +
                       s + "\"");
    }
}

void readStageOutput(Reader& r, const json& j, const std::string& key, StageOutput& out,
                     const std::vector<int>& default_labels) {
    if (!r.object(j, key)) return;
    const json* kind = r.member(j, key, "kind", true);
    if (!kind) return;
    const std::string k = r.string(*kind, Reader::join(key, "kind"));
    if (!r.ok()) return;
    auto readLabels = [&](bool one) {
        const json* x = r.member(j, key, one ? "label" : "labels", false);
        if (!x) {
            out.labels = default_labels;
            if (one && out.labels.size() > 1) out.labels.resize(1);
            return;
        }
        if (one) {
            out.labels = {static_cast<int>(r.integer(*x, Reader::join(key, "label"), 1, 32767))};
            return;
        }
        const std::string lkey = Reader::join(key, "labels");
        if (!r.array(*x, lkey, "label values")) return;
        if (x->empty()) r.fail(lkey, "must list at least one label value");
        std::set<int> seen;
        for (size_t i = 0; i < x->size() && r.ok(); ++i) {
            const int v = static_cast<int>(r.integer((*x)[i], Reader::index(lkey, i), 1, 32767));
            if (r.ok() && !seen.insert(v).second)
                r.fail(Reader::index(lkey, i), "label value " + std::to_string(v) + " twice");
            out.labels.push_back(v);
        }
    };
    if (k == "softmax" || k == "sigmoid") {
        out.kind = k == "softmax" ? StageOutputKind::kSoftmax : StageOutputKind::kSigmoid;
        if (k == "softmax")
            r.onlyKeys(j, key, {"kind", "labels"});
        else
            r.onlyKeys(j, key, {"kind", "labels", "threshold"});
        readLabels(false);
    } else if (k == "probability") {
        out.kind = StageOutputKind::kProbability;
        r.onlyKeys(j, key, {"kind", "channel", "channels", "threshold", "label"});
        if (const json* x = r.member(j, key, "channels", true))
            out.channels = static_cast<int>(r.integer(*x, Reader::join(key, "channels"), 1, 1024));
        if (const json* x = r.member(j, key, "channel", true))
            out.channel = static_cast<int>(r.integer(*x, Reader::join(key, "channel"), 0, 1023));
        if (r.ok() && out.channel >= out.channels)
            r.fail(Reader::join(key, "channel"),
                   "channel " + std::to_string(out.channel) + " is not one of the network's " +
                       std::to_string(out.channels) + " channels (0-based)");
        readLabels(true);
    } else {
        r.fail(Reader::join(key, "kind"),
               "expected \"softmax\", \"sigmoid\" (logits) or \"probability\" (the network "
               "outputs probabilities), got \"" +
                   k + "\"");
        return;
    }
    if (const json* x = r.member(j, key, "threshold", false)) {
        out.threshold = r.number(*x, Reader::join(key, "threshold"));
        if (r.ok() && !(out.threshold > 0.0 && out.threshold < 1.0))
            r.fail(Reader::join(key, "threshold"),
                   "a probability threshold in (0, 1), got " + shortDump(*x));
    }
}

void readStagePostprocess(Reader& r, const json& j, const std::string& key, StagePostprocess& pp) {
    if (!r.object(j, key)) return;
    r.onlyKeys(j, key, {"largest_component", "min_component_ml", "fill_holes"});
    if (const json* x = r.member(j, key, "largest_component", false))
        pp.largest_component = r.boolean(*x, Reader::join(key, "largest_component"));
    if (const json* x = r.member(j, key, "min_component_ml", false)) {
        pp.min_component_ml = r.number(*x, Reader::join(key, "min_component_ml"));
        if (r.ok() && pp.min_component_ml < 0)
            r.fail(Reader::join(key, "min_component_ml"), "must be >= 0");
    }
    if (const json* x = r.member(j, key, "fill_holes", false)) {
        const std::string s = r.string(*x, Reader::join(key, "fill_holes"));
        if (s == "3d")
            pp.fill_holes = FillHoles::k3D;
        else if (s == "slices")
            pp.fill_holes = FillHoles::kPerSlice;
        else if (s == "none")
            pp.fill_holes = FillHoles::kNone;
        else if (r.ok())
            r.fail(Reader::join(key, "fill_holes"),
                   "expected \"3d\", \"slices\" or \"none\", got \"" + s + "\"");
    }
}

// A label value of stage `stage`'s output, or an error naming the link.
bool stageHasLabel(const StageSpec& stage, int label) {
    return std::find(stage.output.labels.begin(), stage.output.labels.end(), label) !=
           stage.output.labels.end();
}

void readCropLink(Reader& r, const json& j, const std::string& key, const ModelPackage& p,
                  CropLink& link) {
    if (!r.object(j, key)) return;
    r.onlyKeys(j, key, {"stage", "label", "margin_fraction", "margin_mm", "slice_fraction"});
    if (const json* x = r.member(j, key, "stage", true))
        link.stage = r.string(*x, Reader::join(key, "stage"));
    if (const json* x = r.member(j, key, "label", true))
        link.label = static_cast<int>(r.integer(*x, Reader::join(key, "label"), 1, 32767));
    if (const json* x = r.member(j, key, "margin_fraction", false)) {
        link.margin_fraction = r.number(*x, Reader::join(key, "margin_fraction"));
        if (r.ok() && !(link.margin_fraction >= 0.0 && link.margin_fraction <= 10.0))
            r.fail(Reader::join(key, "margin_fraction"), "must be in [0, 10]");
    }
    if (const json* x = r.member(j, key, "margin_mm", false)) {
        link.margin_mm = r.number(*x, Reader::join(key, "margin_mm"));
        if (r.ok() && !(link.margin_mm >= 0.0))
            r.fail(Reader::join(key, "margin_mm"), "must be >= 0");
    }
    if (const json* x = r.member(j, key, "slice_fraction", false)) {
        link.slice_fraction = r.number(*x, Reader::join(key, "slice_fraction"));
        if (r.ok() && !(link.slice_fraction >= 0.0 && link.slice_fraction < 1.0))
            r.fail(Reader::join(key, "slice_fraction"), "must be in [0, 1)");
    }
    if (!r.ok()) return;
    for (size_t i = 0; i < p.stages.size(); ++i)
        if (p.stages[i].name == link.stage) link.stage_index = static_cast<int>(i);
    if (link.stage_index < 0) {
        std::string names;
        for (const auto& s : p.stages)
            names += (names.empty() ? "" : ", ") + ("\"" + s.name + "\"");
        r.fail(Reader::join(key, "stage"),
               "no earlier stage is named \"" + link.stage + "\"" +
                   (names.empty() ? " (this is the first stage)"
                                  : " (earlier stages: " + names + ")"));
        return;
    }
    const StageSpec& from = p.stages[static_cast<size_t>(link.stage_index)];
    if (!stageHasLabel(from, link.label)) {
        std::string values;
        for (int v : from.output.labels) values += (values.empty() ? "" : ", ") + std::to_string(v);
        r.fail(Reader::join(key, "label"), "stage \"" + link.stage + "\" produces no label " +
                                               std::to_string(link.label) +
                                               " (its labels: " + values + ")");
    }
}

void readStages(Reader& r, const json& root, ModelPackage& p) {
    std::vector<int> top_labels;
    for (const auto& l : p.labels) top_labels.push_back(l.value);
    const json* stages = r.member(root, "", "stages", true);
    if (!stages || !r.array(*stages, "stages", "stage objects")) return;
    if (stages->empty()) r.fail("stages", "must list at least one stage");
    std::set<std::string> names;
    for (size_t i = 0; i < stages->size() && r.ok(); ++i) {
        const std::string key = Reader::index("stages", i);
        const json& st = (*stages)[i];
        if (!r.object(st, key)) return;
        r.onlyKeys(st, key,
                   {"name", "file", "sha256", "crop_to", "shape", "spacing_mm", "patch_size",
                    "interpolation", "normalization", "output", "postprocess", "inference"});
        StageSpec stage;
        if (const json* x = r.member(st, key, "name", true))
            stage.name = r.string(*x, Reader::join(key, "name"));
        if (r.ok() && !names.insert(stage.name).second)
            r.fail(Reader::join(key, "name"), "stage name \"" + stage.name + "\" is used twice");
        if (const json* x = r.member(st, key, "file", true))
            stage.model.file = r.string(*x, Reader::join(key, "file"));
        if (const json* x = r.member(st, key, "sha256", true))
            stage.model.sha256 = r.string(*x, Reader::join(key, "sha256"));
        if (!r.ok()) return;
        const std::filesystem::path fp(stage.model.file);
        if (fp.is_absolute() || fp.has_parent_path() || stage.model.file == "." ||
            stage.model.file == "..")
            r.fail(
                Reader::join(key, "file"),
                "must be a file name inside the package folder, got \"" + stage.model.file + "\"");
        else if (!isHex64(stage.model.sha256))
            r.fail(Reader::join(key, "sha256"), "expected 64 lower-case hex digits (sha256sum " +
                                                    stage.model.file + "), got \"" +
                                                    stage.model.sha256 + "\"");
        readStageResize(r, st, key, stage);
        if (const json* x = r.member(st, key, "normalization", true))
            readNormalization(r, *x, Reader::join(key, "normalization"), stage.normalization, true);
        if (r.ok() && !stage.normalization.percentiles_of.empty()) {
            const std::string& of = stage.normalization.percentiles_of;
            for (size_t e = 0; e < p.stages.size(); ++e)
                if (p.stages[e].name == of)
                    stage.normalization.percentiles_of_stage = static_cast<int>(e);
            if (of == stage.name)
                stage.normalization.percentiles_of_stage = -1;
            else if (stage.normalization.percentiles_of_stage < 0)
                r.fail(Reader::join(key, "normalization.percentiles_of"),
                       "no earlier stage is named \"" + of + "\"");
        }
        if (const json* x = r.member(st, key, "output", true))
            readStageOutput(r, *x, Reader::join(key, "output"), stage.output, top_labels);
        if (const json* x = r.member(st, key, "postprocess", false))
            readStagePostprocess(r, *x, Reader::join(key, "postprocess"), stage.postprocess);
        if (const json* x = r.member(st, key, "inference", false)) {
            if (!stage.shape.empty())
                r.fail(Reader::join(key, "inference"),
                       "a stage with a fixed shape runs one patch: no sliding-window settings");
            else
                readInference(r, *x, Reader::join(key, "inference"),
                              static_cast<int64_t>(stage.patch_size.size()), stage.inference);
        }
        if (const json* x = r.member(st, key, "crop_to", false)) {
            CropLink link;
            readCropLink(r, *x, Reader::join(key, "crop_to"), p, link);
            stage.crop_to = link;
        }
        if (!r.ok()) return;
        p.stages.push_back(stage);
        p.models.push_back(stage.model);
    }
    if (!r.ok()) return;
    // The last stage gives the result: its labels are the package's labels.
    const StageSpec& last = p.stages.back();
    for (int v : last.output.labels)
        if (std::find(top_labels.begin(), top_labels.end(), v) == top_labels.end())
            r.fail(Reader::join(Reader::index("stages", p.stages.size() - 1), "output"),
                   "the last stage gives the result, but its label " + std::to_string(v) +
                       " is not in \"labels\"");
    if (!r.ok()) return;
    p.output =
        last.output.kind == StageOutputKind::kSoftmax ? OutputKind::kSoftmax : OutputKind::kSigmoid;
    const StageSpec& first = p.stages.front();
    p.patch_size = first.patch();
    p.spacing_mm = first.spacing_mm;

    if (const json* m = r.member(root, "", "measurements", false);
        m && r.array(*m, "measurements", "{name, kind, labels} objects")) {
        std::set<std::string> mnames;
        for (size_t i = 0; i < m->size() && r.ok(); ++i) {
            const std::string key = Reader::index("measurements", i);
            const json& mj = (*m)[i];
            if (!r.object(mj, key)) return;
            r.onlyKeys(mj, key, {"name", "kind", "labels", "description"});
            MeasurementSpec spec;
            if (const json* x = r.member(mj, key, "name", true))
                spec.name = r.string(*x, Reader::join(key, "name"));
            if (r.ok() && !mnames.insert(spec.name).second)
                r.fail(Reader::join(key, "name"), "measurement \"" + spec.name + "\" twice");
            if (const json* x = r.member(mj, key, "kind", true)) {
                spec.kind = r.string(*x, Reader::join(key, "kind"));
                if (r.ok() && spec.kind != "volume_ml")
                    r.fail(Reader::join(key, "kind"),
                           "expected \"volume_ml\" (the labels' volume in mL), got \"" + spec.kind +
                               "\"");
            }
            if (const json* x = r.member(mj, key, "description", false))
                spec.description = r.string(*x, Reader::join(key, "description"), true);
            if (const json* x = r.member(mj, key, "labels", true);
                x && r.array(*x, Reader::join(key, "labels"), "label values")) {
                const std::string lkey = Reader::join(key, "labels");
                if (x->empty()) r.fail(lkey, "must list at least one label value");
                for (size_t e = 0; e < x->size() && r.ok(); ++e) {
                    const int v =
                        static_cast<int>(r.integer((*x)[e], Reader::index(lkey, e), 1, 32767));
                    if (r.ok() &&
                        std::find(top_labels.begin(), top_labels.end(), v) == top_labels.end())
                        r.fail(Reader::index(lkey, e),
                               "label " + std::to_string(v) + " is not in \"labels\"");
                    spec.labels.push_back(v);
                }
            }
            p.measurements.push_back(spec);
        }
    }
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
        case Normalization::Scheme::kPercentile:
            return "percentile";
        case Normalization::Scheme::kWindow:
            return "window";
    }
    return "?";
}

const char* interpolationName(Interpolation interpolation) {
    switch (interpolation) {
        case Interpolation::kNearestExact:
            return "nearest-exact";
        case Interpolation::kLinear:
            return "linear";
        case Interpolation::kSpline3:
            return "spline3";
    }
    return "?";
}

int64_t StageSpec::outputChannels() const {
    const auto n = static_cast<int64_t>(output.labels.size());
    switch (output.kind) {
        case StageOutputKind::kSoftmax:
            return n + 1;
        case StageOutputKind::kSigmoid:
            return n;
        case StageOutputKind::kProbability:
            return output.channels;
    }
    return n;
}

std::vector<int> StageSpec::channelLabelValues() const {
    std::vector<int> values;
    if (output.kind == StageOutputKind::kSoftmax) values.push_back(0);
    values.insert(values.end(), output.labels.begin(), output.labels.end());
    return values;
}

SlidingWindowOptions StageSpec::slidingWindowOptions() const {
    SlidingWindowOptions o;
    o.patch_size = patch();
    o.overlap = inference.overlap;
    o.gaussian = inference.gaussian;
    o.sigma_scale = inference.gaussian_sigma_scale;
    o.mirror_axes = inference.mirror_axes;
    o.convention = inference.convention;
    return o;
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
    ModelPackage p;
    p.folder = folder;

    if (const json* v = r.member(root, "", "format_version", false)) {
        p.format_version = static_cast<int>(r.integer(*v, "format_version", 1, 1000000));
        if (r.ok() && p.format_version > 2)
            return unsupported("model.json has format_version " + std::to_string(p.format_version) +
                                   "; this voxseg reads versions 1 and 2: update voxseg",
                               source);
    }
    const bool v2 = p.format_version >= 2;
    if (v2) {
        for (const char* k :
             {"spacing_mm", "patch_size", "output", "inference", "sha256", "models"})
            if (root.contains(k))
                r.fail(k,
                       "not a top-level key in format_version 2: each entry of \"stages\" has "
                       "its own (see docs/model-package.md, \"Stages\")");
        r.onlyKeys(root, "",
                   {"format_version", "name", "version", "description", "license", "attribution",
                    "citation", "channels", "axis_order", "orientation", "labels", "stages",
                    "measurements"});
    } else {
        for (const char* k : {"stages", "measurements", "citation"})
            if (root.contains(k))
                r.fail(k, "needs \"format_version\": 2 (this model.json is version 1)");
        r.onlyKeys(root, "",
                   {"format_version", "name", "version", "description", "license", "attribution",
                    "channels", "spacing_mm", "patch_size", "axis_order", "orientation", "labels",
                    "output", "inference", "sha256", "models"});
    }
    if (const json* v = r.member(root, "", "name", true)) p.name = r.string(*v, "name");
    if (const json* v = r.member(root, "", "version", true)) p.version = r.string(*v, "version");
    if (const json* v = r.member(root, "", "description", true))
        p.description = r.string(*v, "description", true);
    if (const json* v = r.member(root, "", "license", true)) p.license = r.string(*v, "license");
    if (const json* v = r.member(root, "", "attribution", false))
        p.attribution = r.string(*v, "attribution", true);
    if (const json* v = r.member(root, "", "citation", false))
        p.citation = r.string(*v, "citation", true);

    if (const json* v = r.member(root, "", "channels", true);
        v && r.array(*v, "channels", "{modality, normalization} objects")) {
        if (v->empty()) r.fail("channels", "must list at least one input channel");
        for (size_t i = 0; i < v->size() && r.ok(); ++i) {
            const std::string key = Reader::index("channels", i);
            const json& c = (*v)[i];
            if (!r.object(c, key)) break;
            if (v2)  // version 2: each stage normalises its own input
                r.onlyKeys(c, key, {"modality"});
            else
                r.onlyKeys(c, key, {"modality", "normalization"});
            ChannelSpec ch;
            if (const json* m = r.member(c, key, "modality", true))
                ch.modality = r.string(*m, Reader::join(key, "modality"));
            if (!v2)
                if (const json* n = r.member(c, key, "normalization", true))
                    readNormalization(r, *n, Reader::join(key, "normalization"), ch.normalization,
                                      false);
            p.channels.push_back(ch);
        }
    }

    if (const json* v = v2 ? nullptr : r.member(root, "", "patch_size", true);
        v && r.array(*v, "patch_size", "positive integers")) {
        for (size_t i = 0; i < v->size() && r.ok(); ++i)
            p.patch_size.push_back(r.integer((*v)[i], Reader::index("patch_size", i), 1, 4096));
        if (r.ok() && (p.patch_size.size() < 2 || p.patch_size.size() > 3))
            r.fail("patch_size", "expected 2 or 3 entries (2D or 3D network), got " +
                                     std::to_string(p.patch_size.size()));
    }
    if (const json* v = v2 ? nullptr : r.member(root, "", "spacing_mm", true);
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
    if (v2) {
        readStages(r, root, p);
        if (!r.ok()) return r.status();
        return p;
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

    if (const json* v = r.member(root, "", "inference", false))
        readInference(r, *v, "inference", static_cast<int64_t>(p.patch_size.size()), p.inference);

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

namespace {

json normalizationJson(const Normalization& n) {
    json j{{"scheme", normalizationSchemeName(n.scheme)}};
    switch (n.scheme) {
        case Normalization::Scheme::kCT:
            j["clip"] = {n.clip_low, n.clip_high};
            j["mean"] = n.mean;
            j["std"] = n.std;
            break;
        case Normalization::Scheme::kZScore:
            if (n.nonzero_mask) j["mask"] = "nonzero";
            break;
        case Normalization::Scheme::kNone:
            break;
        case Normalization::Scheme::kPercentile:
            j["percentiles"] = {n.percentile_low, n.percentile_high};
            if (!n.percentiles_of.empty()) j["percentiles_of"] = n.percentiles_of;
            if (n.has_range) j["range"] = {n.range_low, n.range_high};
            j["zscore"] = n.zscore;
            j["std_ddof"] = n.std_ddof;
            j["affine"] = {n.affine_scale, n.affine_shift};
            break;
        case Normalization::Scheme::kWindow:
            j["window"] = {n.clip_low, n.clip_high};
            j["range"] = {n.range_low, n.range_high};
            j["affine"] = {n.affine_scale, n.affine_shift};
            break;
    }
    return j;
}

json inferenceJson(const InferenceSpec& inf) {
    return {{"overlap", inf.overlap},
            {"gaussian", inf.gaussian},
            {"gaussian_sigma_scale", inf.gaussian_sigma_scale},
            {"mirror_axes", inf.mirror_axes},
            {"convention", windowConventionName(inf.convention)}};
}

json stageJson(const StageSpec& st) {
    json j{{"name", st.name}, {"file", st.model.file}, {"sha256", st.model.sha256}};
    if (st.crop_to) {
        const CropLink& c = *st.crop_to;
        j["crop_to"] = {{"stage", c.stage},
                        {"label", c.label},
                        {"margin_fraction", c.margin_fraction},
                        {"margin_mm", c.margin_mm},
                        {"slice_fraction", c.slice_fraction}};
    }
    if (!st.shape.empty()) {
        j["shape"] = st.shape;
    } else {
        j["spacing_mm"] = st.spacing_mm;
        j["patch_size"] = st.patch_size;
        j["inference"] = inferenceJson(st.inference);
    }
    j["interpolation"] = interpolationName(st.interpolation);
    j["normalization"] = normalizationJson(st.normalization);
    json out;
    switch (st.output.kind) {
        case StageOutputKind::kSoftmax:
            out = {{"kind", "softmax"}, {"labels", st.output.labels}};
            break;
        case StageOutputKind::kSigmoid:
            out = {{"kind", "sigmoid"},
                   {"labels", st.output.labels},
                   {"threshold", st.output.threshold}};
            break;
        case StageOutputKind::kProbability:
            out = {{"kind", "probability"},
                   {"channels", st.output.channels},
                   {"channel", st.output.channel},
                   {"threshold", st.output.threshold},
                   {"label", st.output.labels.at(0)}};
            break;
    }
    j["output"] = out;
    const char* fill = st.postprocess.fill_holes == FillHoles::k3D         ? "3d"
                       : st.postprocess.fill_holes == FillHoles::kPerSlice ? "slices"
                                                                           : "none";
    j["postprocess"] = {{"largest_component", st.postprocess.largest_component},
                        {"min_component_ml", st.postprocess.min_component_ml},
                        {"fill_holes", fill}};
    return j;
}

}  // namespace

std::string modelPackageToJson(const ModelPackage& p) {
    json j;
    j["format_version"] = p.format_version;
    j["name"] = p.name;
    j["version"] = p.version;
    j["description"] = p.description;
    j["license"] = p.license;
    if (!p.attribution.empty()) j["attribution"] = p.attribution;
    const bool v2 = p.hasStages();
    if (v2 && !p.citation.empty()) j["citation"] = p.citation;
    json channels = json::array();
    for (const auto& c : p.channels) {
        if (v2)
            channels.push_back({{"modality", c.modality}});
        else
            channels.push_back(
                {{"modality", c.modality}, {"normalization", normalizationJson(c.normalization)}});
    }
    j["channels"] = channels;
    if (!v2) {
        j["spacing_mm"] = p.spacing_mm;
        j["patch_size"] = p.patch_size;
    }
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
    if (v2) {
        json stages = json::array();
        for (const StageSpec& st : p.stages) stages.push_back(stageJson(st));
        j["stages"] = stages;
        if (!p.measurements.empty()) {
            json ms = json::array();
            for (const MeasurementSpec& m : p.measurements)
                ms.push_back({{"name", m.name},
                              {"kind", m.kind},
                              {"labels", m.labels},
                              {"description", m.description}});
            j["measurements"] = ms;
        }
        return j.dump(2) + "\n";
    }
    j["output"] = p.output == OutputKind::kSoftmax ? "softmax" : "sigmoid";
    j["inference"] = inferenceJson(p.inference);
    if (p.models.size() == 1 && p.models[0].file == "model.onnx") {
        j["sha256"] = p.models[0].sha256;
    } else {
        json models = json::array();
        for (const auto& m : p.models) models.push_back({{"file", m.file}, {"sha256", m.sha256}});
        j["models"] = models;
    }
    return j.dump(2) + "\n";
}

namespace {

// Imports a version 2 package's stage networks (one per stage) and checks their shapes.
Status loadStages(const std::filesystem::path& folder, LoadedModel& model) {
    const ModelPackage& p = model.package;
    for (const StageSpec& st : p.stages) {
        Shape input = {1, static_cast<int64_t>(p.channels.size())};
        const auto patch = st.patch();
        input.insert(input.end(), patch.begin(), patch.end());
        Shape expected = input;
        expected[1] = st.outputChannels();
        const auto path = folder / st.model.file;
        OnnxImportOptions options;
        options.input_shapes = {input};
        auto graph = importOnnx(path, options);
        if (!graph.isOk())
            return graph.status().withContext("stage " + st.name + ": " + st.model.file +
                                              " (for input " + shapeToString(input) + "): ");
        if (graph->inputs.size() != 1 || graph->outputs.empty())
            return unsupported("stage " + st.name + ": " + st.model.file +
                                   " must have one input and at least one output",
                               path.string());
        const Shape& out = graph->values[graph->outputs[0]].shape;
        if (out != expected)
            return invalidArgument("stage " + st.name + ": " + st.model.file + " produces " +
                                       shapeToString(out) + " for input " + shapeToString(input) +
                                       ", but its output in model.json implies " +
                                       shapeToString(expected),
                                   path.string());
        model.graphs.push_back(std::move(graph).value());
    }
    return Status::ok();
}

}  // namespace

Result<LoadedModel> loadModelPackage(const std::filesystem::path& folder) {
    LoadedModel model;
    VOXSEG_ASSIGN_OR_RETURN(model.package, readModelPackage(folder));
    const ModelPackage& p = model.package;
    VOXSEG_RETURN_IF_ERROR(verifyModelFiles(p));
    if (p.hasStages()) {
        VOXSEG_RETURN_IF_ERROR(loadStages(folder, model));
        return model;
    }
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
    if (model.package.hasStages())
        return unsupported("model " + model.package.name +
                           " has stages (format_version 2): each stage has its own window");
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

Result<std::unique_ptr<SlidingWindow>> createStageWindow(Backend& backend, const LoadedModel& model,
                                                         size_t stage, int batch,
                                                         const CompileOptions& compile) {
    const ModelPackage& p = model.package;
    if (stage >= p.stages.size() || stage >= model.graphs.size())
        return invalidArgument("model " + p.name + " has no stage " + std::to_string(stage));
    SlidingWindowOptions options = p.stages[stage].slidingWindowOptions();
    options.batch = batch;
    options.accumulator = DType::kFloat32;
    options.compile = compile;
    auto sw = SlidingWindow::create(backend, model.graphs[stage],
                                    static_cast<int64_t>(p.channels.size()), options);
    if (!sw.isOk())
        return sw.status().withContext("model " + p.name + ", stage " + p.stages[stage].name +
                                       ": ");
    return sw;
}

}  // namespace voxseg::engine
