#include "engine/model/model_json.h"

#include <algorithm>
#include <cmath>
#include <regex>

namespace voxseg::engine::detail {

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
              double& b, bool ordered) {
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

void readPrecision(Reader& r, const json& j, const std::string& key, PrecisionSpec& out) {
    if (!r.object(j, key)) return;
    r.onlyKeys(j, key, {"requires_fp32", "reason"});
    if (const json* v = r.member(j, key, "requires_fp32", true))
        out.requires_fp32 = r.boolean(*v, Reader::join(key, "requires_fp32"));
    if (const json* v = r.member(j, key, "reason", false))
        out.reason = r.string(*v, Reader::join(key, "reason"), true);
}

json precisionJson(const PrecisionSpec& spec) {
    json j{{"requires_fp32", spec.requires_fp32}};
    if (!spec.reason.empty()) j["reason"] = spec.reason;
    return j;
}

// `inference` (version 1 top level, version 2 per stage): sliding-window settings; `rank` is
// the patch's (mirror axes must be spatial axes of it).
void readInference(Reader& r, const json& v, const std::string& ikey, int64_t rank,
                   InferenceSpec& inf) {
    if (!r.object(v, ikey)) return;
    r.onlyKeys(v, ikey,
               {"overlap", "gaussian", "gaussian_sigma_scale", "mirror_axes", "convention",
                "accumulate", "output_size"});
    if (const json* x = r.member(v, ikey, "output_size", false)) {
        const std::string okey = Reader::join(ikey, "output_size");
        if (r.array(*x, okey, "the network's output size per spatial axis")) {
            if (rank > 0 && static_cast<int64_t>(x->size()) != rank)
                r.fail(okey, "needs " + std::to_string(rank) + " sizes (one per patch axis), got " +
                                 std::to_string(x->size()));
            for (size_t i = 0; i < x->size() && r.ok(); ++i)
                inf.output_size.push_back(r.integer((*x)[i], Reader::index(okey, i), 1, 4096));
        }
        for (const char* k : {"overlap", "gaussian", "gaussian_sigma_scale", "mirror_axes",
                              "convention", "accumulate"})
            if (r.ok() && v.contains(k))
                r.fail(Reader::join(ikey, k),
                       "not used with \"output_size\" (a 'valid' network is tiled without "
                       "overlap, weights or mirroring, as DeepVoxNet tiles it)");
    }
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
    if (const json* x = r.member(v, ikey, "accumulate", false)) {
        const std::string s = r.string(*x, Reader::join(ikey, "accumulate"));
        if (r.ok()) {
            auto a = parseAccumulation(s);
            if (a.isOk())
                inf.accumulation = *a;
            else
                r.fail(Reader::join(ikey, "accumulate"),
                       "expected \"normalized\" or \"nnunet-fp16\", got \"" + s + "\"");
        }
        if (r.ok() && inf.accumulation == Accumulation::kNnUNetFp16 &&
            inf.convention != WindowConvention::kNnUNet)
            r.fail(Reader::join(ikey, "accumulate"),
                   "\"nnunet-fp16\" is nnU-Net's arithmetic and needs \"convention\": \"nnunet\"");
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

void readChannelName(Reader& r, const json& c, const std::string& key, const json& all, size_t i,
                     ChannelSpec& ch) {
    ch.name = all.size() == 1 ? ch.modality : "channel" + std::to_string(i);
    if (const json* x = r.member(c, key, "name", false)) {
        ch.name = r.string(*x, Reader::join(key, "name"));
        const bool plain = std::all_of(ch.name.begin(), ch.name.end(), [](unsigned char k) {
            return std::isalnum(k) || k == '_' || k == '-' || k == '.';
        });
        if (r.ok() && !plain)
            r.fail(Reader::join(key, "name"),
                   "use letters, digits, '_', '-' or '.' (it is written as --channel NAME=...), "
                   "got \"" +
                       ch.name + "\"");
    }
    const json* m = r.member(c, key, "match", false);
    if (!m) return;
    const std::string mkey = Reader::join(key, "match");
    if (!r.object(*m, mkey)) return;
    r.onlyKeys(*m, mkey, {"series_description", "image_type", "echo_time_ms"});
    if (const json* x = r.member(*m, mkey, "series_description", false)) {
        ch.match.series_description = r.string(*x, Reader::join(mkey, "series_description"));
        try {
            std::regex(ch.match.series_description, std::regex::ECMAScript | std::regex::icase);
        } catch (const std::regex_error& e) {
            r.fail(Reader::join(mkey, "series_description"),
                   std::string("not a valid regular expression (ECMAScript): ") + e.what());
        }
    }
    if (const json* x = r.member(*m, mkey, "image_type", false))
        ch.match.image_type = r.string(*x, Reader::join(mkey, "image_type"));
    if (const json* x = r.member(*m, mkey, "echo_time_ms", false)) {
        std::array<double, 2> te{};
        const std::string tkey = Reader::join(mkey, "echo_time_ms");
        if (readPair(r, *x, tkey, "[low, high] in ms", te[0], te[1], false)) {
            if (te[0] > te[1] || te[0] < 0)
                r.fail(tkey, "expected 0 <= low <= high, got " + shortDump(*x));
            ch.match.echo_time_ms = te;
        }
    }
}

json seriesMatchJson(const SeriesMatch& m) {
    json j = json::object();
    if (!m.series_description.empty()) j["series_description"] = m.series_description;
    if (!m.image_type.empty()) j["image_type"] = m.image_type;
    if (m.echo_time_ms) j["echo_time_ms"] = {(*m.echo_time_ms)[0], (*m.echo_time_ms)[1]};
    return j;
}

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
    json j = {{"overlap", inf.overlap},
              {"gaussian", inf.gaussian},
              {"gaussian_sigma_scale", inf.gaussian_sigma_scale},
              {"mirror_axes", inf.mirror_axes},
              {"convention", windowConventionName(inf.convention)}};
    if (inf.accumulation != Accumulation::kNormalized)
        j["accumulate"] = accumulationName(inf.accumulation);
    if (!inf.output_size.empty()) j = {{"output_size", inf.output_size}};
    return j;
}

// intended_input: {modality, body_region, extent_mm, spacing_mm, expects_crop}.
void readIntendedInput(Reader& r, const json& j, const std::string& key, IntendedInput& out) {
    if (!r.object(j, key)) return;
    r.onlyKeys(j, key, {"modality", "body_region", "extent_mm", "spacing_mm", "expects_crop"});
    if (const json* x = r.member(j, key, "modality", false)) {
        const std::string mkey = Reader::join(key, "modality");
        if (r.array(*x, mkey, "modality strings such as \"MR\"")) {
            if (x->empty()) r.fail(mkey, "must list at least one modality (or leave it out)");
            for (size_t i = 0; i < x->size() && r.ok(); ++i)
                out.modalities.push_back(r.string((*x)[i], Reader::index(mkey, i)));
        }
    }
    if (const json* x = r.member(j, key, "body_region", false))
        out.body_region = r.string(*x, Reader::join(key, "body_region"));
    auto positivePair = [&](const json& v, const std::string& k, std::array<double, 2>& pair) {
        if (!readPair(r, v, k, "[low, high] in mm", pair[0], pair[1], false)) return;
        if (!(pair[0] >= 0.0 && pair[0] <= pair[1]))
            r.fail(k, "expected 0 <= low <= high, got " + shortDump(v));
    };
    if (const json* x = r.member(j, key, "extent_mm", false)) {
        const std::string ekey = Reader::join(key, "extent_mm");
        // [low, high] for every axis, or [[low, high], [low, high], [low, high]] per axis i, j, k.
        if (x->is_array() && x->size() == 2 && (*x)[0].is_number()) {
            out.extent_mm.resize(1);
            positivePair(*x, ekey, out.extent_mm[0]);
        } else if (x->is_array() && x->size() == 3) {
            out.extent_mm.resize(3);
            for (size_t a = 0; a < 3 && r.ok(); ++a)
                positivePair((*x)[a], Reader::index(ekey, a), out.extent_mm[a]);
        } else {
            r.failType(ekey, "[low, high] (every axis) or three [low, high] (axes i, j, k) in mm",
                       *x);
        }
    }
    if (const json* x = r.member(j, key, "spacing_mm", false)) {
        std::array<double, 2> pair{};
        positivePair(*x, Reader::join(key, "spacing_mm"), pair);
        out.spacing_mm = pair;
    }
    if (const json* x = r.member(j, key, "expects_crop", false))
        out.expects_crop = r.boolean(*x, Reader::join(key, "expects_crop"));
}

json intendedInputJson(const IntendedInput& in) {
    json j = json::object();
    if (!in.modalities.empty()) j["modality"] = in.modalities;
    if (!in.body_region.empty()) j["body_region"] = in.body_region;
    if (in.extent_mm.size() == 1) j["extent_mm"] = in.extent_mm[0];
    if (in.extent_mm.size() == 3) j["extent_mm"] = in.extent_mm;
    if (in.spacing_mm) j["spacing_mm"] = *in.spacing_mm;
    j["expects_crop"] = in.expects_crop;
    return j;
}

void readPlausibleVolume(Reader& r, const json& j, const std::string& key, int label,
                         std::vector<PlausibleVolume>& out) {
    PlausibleVolume v{label, 0.0, 0.0};
    if (!readPair(r, j, key, "[low, high] in mL", v.low_ml, v.high_ml, false)) return;
    if (!(v.low_ml >= 0.0 && v.low_ml <= v.high_ml))
        r.fail(key, "expected 0 <= low <= high (mL), got " + shortDump(j));
    out.push_back(v);
}

}  // namespace voxseg::engine::detail
