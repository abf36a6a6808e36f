// model.json "quantization": reading with the model.json Reader's checks and messages, writing,
// and the package's half of the int8 decision.
#include "engine/model/model_quantization.h"

#include "engine/model/model_json.h"

#include <cmath>
#include <set>

namespace voxseg::engine {

using detail::Reader;
using nlohmann::json;

namespace {

double readUnit(Reader& r, const json& j, const std::string& key, const std::string& name) {
    const json* v = r.member(j, key, name, true);
    if (!v) return 0;
    const std::string k = Reader::join(key, name);
    const double x = r.number(*v, k);
    if (r.ok() && !(x >= 0 && x <= 1)) r.fail(k, "must be in [0, 1]");
    return x;
}

void readActivations(Reader& r, const json& j, const std::string& key, QuantizationRecord& q) {
    if (!r.object(j, key)) return;
    if (j.empty()) r.fail(key, "must name at least one tensor");
    for (const auto& [name, v] : j.items()) {
        const std::string k = key + "['" + name + "']";
        if (name.empty()) r.fail(k, "a tensor name must not be empty");
        if (!r.object(v, k)) return;
        r.onlyKeys(v, k, {"scale", "zero_point"});
        quant::ActivationQuant a;
        if (const json* s = r.member(v, k, "scale", true)) {
            a.scale = static_cast<float>(r.number(*s, Reader::join(k, "scale")));
            if (r.ok() && !(a.scale > 0 && std::isfinite(a.scale)))
                r.fail(Reader::join(k, "scale"), "must be positive and finite");
        }
        if (const json* z = r.member(v, k, "zero_point", true))
            a.zero_point =
                static_cast<int32_t>(r.integer(*z, Reader::join(k, "zero_point"), 0, 255));
        q.activations[name] = a;
    }
}

void readNormInputs(Reader& r, const json& j, const std::string& key, QuantizationRecord& q) {
    if (!r.object(j, key)) return;
    for (const auto& [name, v] : j.items()) {
        const std::string k = key + "['" + name + "']";
        if (name.empty()) r.fail(k, "a tensor name must not be empty");
        if (!r.array(v, k, "per-channel scales")) return;
        std::vector<float>& scales = q.norm_inputs[name];
        for (size_t i = 0; i < v.size(); ++i) {
            scales.push_back(static_cast<float>(r.number(v[i], Reader::index(k, i))));
            if (r.ok() && !(scales.back() > 0 && std::isfinite(scales.back())))
                r.fail(Reader::index(k, i), "must be positive and finite");
        }
        if (r.ok() && scales.empty()) r.fail(k, "must have one scale per channel");
    }
}

void readCalibration(Reader& r, const json& j, const std::string& key, QuantizationRecord& q) {
    if (!r.object(j, key)) return;
    r.onlyKeys(j, key, {"method", "percentile", "zero_points", "cases", "held_back"});
    if (const json* m = r.member(j, key, "method", true)) {
        const std::string name = r.string(*m, Reader::join(key, "method"));
        bool known = false;
        for (RangeMethod method :
             {RangeMethod::kPercentile, RangeMethod::kMse, RangeMethod::kMinMax})
            if (name == rangeMethodName(method)) {
                q.method = method;
                known = true;
            }
        if (!known && r.ok())
            r.fail(Reader::join(key, "method"), "must be percentile, mse or minmax");
    }
    if (const json* p = r.member(j, key, "percentile", q.method == RangeMethod::kPercentile)) {
        q.percentile = r.number(*p, Reader::join(key, "percentile"));
        if (r.ok() && !(q.percentile > 50 && q.percentile <= 100))
            r.fail(Reader::join(key, "percentile"), "must be in (50, 100]");
    }
    if (const json* z = r.member(j, key, "zero_points", false)) {
        const std::string name = r.string(*z, Reader::join(key, "zero_points"));
        if (const auto parsed = quant::parseZeroPoints(name))
            q.zero_points = *parsed;
        else if (r.ok())
            r.fail(Reader::join(key, "zero_points"), "must be always or where-needed");
    }
    if (const json* c = r.member(j, key, "cases", true)) {
        const std::string k = Reader::join(key, "cases");
        if (r.array(*c, k, "case names"))
            for (size_t i = 0; i < c->size(); ++i)
                q.calibration_cases.push_back(r.string((*c)[i], Reader::index(k, i)));
        if (r.ok() && q.calibration_cases.empty()) r.fail(k, "must name at least one case");
    }
    const json* h = r.member(j, key, "held_back", false);
    if (!h) return;
    const std::string hk = Reader::join(key, "held_back");
    if (!r.object(*h, hk)) return;
    r.onlyKeys(*h, hk,
               {"cases", "dice_min", "dice_mean", "voxel_agreement", "min_dice", "min_agreement"});
    HeldBackAgreement a;
    if (const json* c = r.member(*h, hk, "cases", true)) {
        const std::string k = Reader::join(hk, "cases");
        const std::set<std::string> used(q.calibration_cases.begin(), q.calibration_cases.end());
        if (r.array(*c, k, "case names"))
            for (size_t i = 0; i < c->size(); ++i) {
                a.cases.push_back(r.string((*c)[i], Reader::index(k, i)));
                if (r.ok() && used.count(a.cases.back()))
                    r.fail(Reader::index(k, i), "'" + a.cases.back() +
                                                    "' was a calibration case: held-back cases "
                                                    "must be cases calibration did not see");
            }
        if (r.ok() && a.cases.empty()) r.fail(k, "must name at least one case");
    }
    a.dice_min = readUnit(r, *h, hk, "dice_min");
    a.dice_mean = readUnit(r, *h, hk, "dice_mean");
    a.voxel_agreement = readUnit(r, *h, hk, "voxel_agreement");
    if (h->contains("min_dice")) a.min_dice = readUnit(r, *h, hk, "min_dice");
    if (h->contains("min_agreement")) a.min_agreement = readUnit(r, *h, hk, "min_agreement");
    if (r.ok() && (a.dice_min < a.min_dice || a.voxel_agreement < a.min_agreement))
        r.fail(hk, "records figures below its own gate (dice_min " + std::to_string(a.dice_min) +
                       " vs min_dice " + std::to_string(a.min_dice) + ", voxel_agreement " +
                       std::to_string(a.voxel_agreement) + " vs min_agreement " +
                       std::to_string(a.min_agreement) + "): calibrate the package again");
    q.held_back = a;
}

}  // namespace

void detail::readQuantization(Reader& r, const json& j, const std::string& key,
                              QuantizationRecord& q) {
    if (!r.object(j, key)) return;
    r.onlyKeys(
        j, key,
        {"weight_bits", "activations", "float_layers", "norm_inputs", "upsampling", "calibration"});
    if (const json* b = r.member(j, key, "weight_bits", true))
        q.weight_bits = static_cast<int>(r.integer(*b, Reader::join(key, "weight_bits"), 7, 8));
    if (const json* a = r.member(j, key, "activations", true))
        readActivations(r, *a, Reader::join(key, "activations"), q);
    if (const json* f = r.member(j, key, "float_layers", false)) {
        const std::string k = Reader::join(key, "float_layers");
        if (r.array(*f, k, "node names"))
            for (size_t i = 0; i < f->size(); ++i)
                q.float_layers.push_back(r.string((*f)[i], Reader::index(k, i)));
    }
    if (const json* n = r.member(j, key, "norm_inputs", false))
        readNormInputs(r, *n, Reader::join(key, "norm_inputs"), q);
    if (const json* u = r.member(j, key, "upsampling", false)) {
        const std::string k = Reader::join(key, "upsampling");
        const std::string v = r.string(*u, k);
        if (v != "int8" && v != "float") r.fail(k, "must be int8 or float");
        q.int8_upsampling = v == "int8";
    }
    if (const json* c = r.member(j, key, "calibration", true))
        readCalibration(r, *c, Reader::join(key, "calibration"), q);
}

Result<QuantizationRecord> readQuantization(const json& j, const std::string& key,
                                            const std::string& source) {
    Reader r(source);
    QuantizationRecord q;
    detail::readQuantization(r, j, key, q);
    if (!r.ok()) return r.status();
    return q;
}

json quantizationJson(const QuantizationRecord& q) {
    json acts = json::object();
    for (const auto& [name, a] : q.activations)
        acts[name] = {{"scale", a.scale}, {"zero_point", a.zero_point}};
    json cal{{"method", rangeMethodName(q.method)}, {"cases", q.calibration_cases}};
    if (q.method == RangeMethod::kPercentile) cal["percentile"] = q.percentile;
    if (q.zero_points != quant::ZeroPoints::kAlways)
        cal["zero_points"] = quant::zeroPointsName(q.zero_points);
    if (q.held_back)
        cal["held_back"] = {{"cases", q.held_back->cases},
                            {"dice_min", q.held_back->dice_min},
                            {"dice_mean", q.held_back->dice_mean},
                            {"voxel_agreement", q.held_back->voxel_agreement},
                            {"min_dice", q.held_back->min_dice},
                            {"min_agreement", q.held_back->min_agreement}};
    json j{{"weight_bits", q.weight_bits}, {"activations", acts}, {"calibration", cal}};
    if (!q.float_layers.empty()) j["float_layers"] = q.float_layers;
    if (!q.norm_inputs.empty()) j["norm_inputs"] = q.norm_inputs;
    if (q.int8_upsampling) j["upsampling"] = "int8";
    return j;
}

Status int8PackageSupport(const std::optional<QuantizationRecord>& q, const std::string& model,
                          int cpu_weight_bits) {
    const std::string instead = "; use --precision fp32, bf16 or auto";
    if (!q)
        return unsupported("model '" + model +
                               "' has no int8 calibration (model.json \"quantization\"): run "
                               "`voxseg model calibrate` on it first (docs/int8.md)" +
                               instead,
                           model);
    if (!q->held_back)
        return unsupported("model '" + model +
                               "' is calibrated for int8 but was not measured on held-back cases "
                               "(model.json \"quantization.calibration.held_back\"): calibrate "
                               "again with cases to hold back (docs/int8.md)" +
                               instead,
                           model);
    if (q->weight_bits > cpu_weight_bits)
        return unsupported("model '" + model + "' was calibrated with " +
                               std::to_string(q->weight_bits) +
                               "-bit int8 weights, and this CPU "
                               "multiplies only " +
                               std::to_string(cpu_weight_bits) +
                               "-bit weights exactly (no VNNI or AMX): recalibrate on this CPU "
                               "or with --weight-bits 7 (docs/int8.md)" +
                               instead,
                           model);
    return Status::ok();
}

}  // namespace voxseg::engine
