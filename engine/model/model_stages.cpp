#include "engine/model/model_json.h"

#include "core/limits.h"
#include "engine/onnx/import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

namespace voxseg::engine::detail {

namespace {

// A non-empty array of distinct label values 1..32767 at `key` into `out`.
void readLabelValues(Reader& r, const json& x, const std::string& key, std::vector<int>& out) {
    if (!r.array(x, key, "label values")) return;
    if (x.empty()) r.fail(key, "must list at least one label value");
    std::set<int> seen;
    for (size_t i = 0; i < x.size() && r.ok(); ++i) {
        const int v = static_cast<int>(r.integer(x[i], Reader::index(key, i), 1, 32767));
        if (r.ok() && !seen.insert(v).second)
            r.fail(Reader::index(key, i), "label value " + std::to_string(v) + " twice");
        out.push_back(v);
    }
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

// "grid": "totalsegmentator": TotalSegmentator's change_spacing (scipy zoom, order 1) before an
// nnU-Net network, its labels back with an order-0 zoom: a spacing_mm stage with linear
// interpolation and a softmax output (pipeline/scipy_zoom.h).
void readTotalSegmentatorGrid(Reader& r, const std::string& gkey, StageSpec& stage) {
    stage.grid = StageGrid::kTotalSegmentator;
    if (!stage.shape.empty() || stage.spacing_mm.empty())
        r.fail(gkey,
               "\"totalsegmentator\" resamples to a spacing: it needs spacing_mm, not a "
               "fixed shape");
    else if (stage.interpolation != Interpolation::kLinear)
        r.fail(gkey, std::string("\"totalsegmentator\" resamples the image with order 1: it "
                                 "needs \"interpolation\": \"linear\", got \"") +
                         interpolationName(stage.interpolation) + "\"");
    else if (stage.output.kind != StageOutputKind::kSoftmax)
        r.fail(gkey, "\"totalsegmentator\" takes nnU-Net's softmax (argmax) output only");
    else if (stage.one_hot_from)
        r.fail(gkey, "\"totalsegmentator\" cannot take one_hot_from (nnU-Net's cascade)");
}

// "grid": "fov" (default) or "monai" (MONAI Spacingd/Invertd): a spacing_mm stage with linear
// interpolation and a softmax output only (what pipeline/monai_spacing.h reproduces).
void readStageGrid(Reader& r, const json& x, const std::string& key, StageSpec& stage) {
    const std::string gkey = Reader::join(key, "grid");
    const std::string g = r.string(x, gkey);
    if (!r.ok()) return;
    if (g == "fov") {
        stage.grid = StageGrid::kFieldOfView;
        return;
    }
    if (g == "totalsegmentator") {
        readTotalSegmentatorGrid(r, gkey, stage);
        return;
    }
    if (g != "monai") {
        r.fail(gkey,
               "expected \"fov\" (the field of view kept edge to edge), \"monai\" "
               "(MONAI Spacingd's grid) or \"totalsegmentator\" (its scipy zoom), got \"" +
                   g + "\"");
        return;
    }
    stage.grid = StageGrid::kMonai;
    if (!stage.shape.empty() || stage.spacing_mm.empty())
        r.fail(gkey, "\"monai\" is Spacingd's grid: it needs spacing_mm, not a fixed shape");
    else if (stage.interpolation != Interpolation::kLinear)
        r.fail(gkey, std::string("\"monai\" reproduces Spacingd mode \"bilinear\": it needs "
                                 "\"interpolation\": \"linear\", got \"") +
                         interpolationName(stage.interpolation) + "\"");
    else if (stage.output.kind != StageOutputKind::kSoftmax)
        r.fail(gkey,
               "\"monai\" inverts a softmax output (Activationsd softmax, Invertd, "
               "AsDiscreted argmax) only");
    else if (stage.one_hot_from)
        r.fail(gkey, "\"monai\" cannot take one_hot_from (nnU-Net's cascade resampling)");
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
        readLabelValues(r, *x, Reader::join(key, "labels"), out.labels);
    };
    if (k == "softmax" || k == "sigmoid") {
        out.kind = k == "softmax" ? StageOutputKind::kSoftmax : StageOutputKind::kSigmoid;
        if (k == "softmax")
            r.onlyKeys(j, key, {"kind", "labels"});
        else
            r.onlyKeys(j, key, {"kind", "labels", "threshold"});
        readLabels(false);
    } else if (k == "regions") {
        // nnU-Net region-based models: dataset.json's regions and regions_class_order.
        out.kind = StageOutputKind::kRegions;
        r.onlyKeys(j, key, {"kind", "regions", "regions_class_order"});
        const std::string rkey = Reader::join(key, "regions");
        if (const json* x = r.member(j, key, "regions", true);
            x && r.array(*x, rkey, "arrays of label values")) {
            if (x->empty()) r.fail(rkey, "must list at least one region");
            for (size_t i = 0; i < x->size() && r.ok(); ++i) {
                const std::string ikey = Reader::index(rkey, i);
                std::vector<int> region;
                if (!r.array((*x)[i], ikey, "label values")) break;
                if ((*x)[i].empty()) r.fail(ikey, "a region holds at least one label value");
                for (size_t e = 0; e < (*x)[i].size() && r.ok(); ++e)
                    region.push_back(
                        static_cast<int>(r.integer((*x)[i][e], Reader::index(ikey, e), 1, 32767)));
                out.regions.push_back(region);
            }
        }
        const std::string okey = Reader::join(key, "regions_class_order");
        if (const json* x = r.member(j, key, "regions_class_order", true)) {
            readLabelValues(r, *x, okey, out.labels);
            if (r.ok() && out.labels.size() != out.regions.size())
                r.fail(okey, "has " + std::to_string(out.labels.size()) +
                                 " entries but there are " + std::to_string(out.regions.size()) +
                                 " regions: one label value per region (network channel)");
        }
        return;
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
               "expected \"softmax\", \"sigmoid\", \"regions\" (logits) or \"probability\" "
               "(the network outputs probabilities), got \"" +
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

void readPostprocessRule(Reader& r, const json& j, const std::string& key, PostprocessRule& pp) {
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

// "postprocess": a rule for every label, "labels" {"<value>": rule}, "connectivity" 6 | 26,
// "grid" "input" | "stage" (StagePostprocess). The label values are checked against the stage's
// output by checkPostprocess once the stage is read.
void readStagePostprocess(Reader& r, const json& j, const std::string& key, StagePostprocess& pp) {
    if (!r.object(j, key)) return;
    r.onlyKeys(
        j, key,
        {"largest_component", "min_component_ml", "fill_holes", "labels", "connectivity", "grid"});
    readPostprocessRule(r, j, key, pp);
    if (const json* x = r.member(j, key, "labels", false)) {
        const std::string lkey = Reader::join(key, "labels");
        if (!r.object(*x, lkey)) return;
        for (const auto& [name, rule] : x->items()) {
            const std::string rkey = Reader::join(lkey, name);
            char* end = nullptr;
            const long value = std::strtol(name.c_str(), &end, 10);
            if (name.empty() || *end != '\0' || value < 1 || value > 32767) {
                r.fail(rkey, "a label value (1-32767) is expected as the key");
                return;
            }
            if (!r.object(rule, rkey)) return;
            r.onlyKeys(rule, rkey, {"largest_component", "min_component_ml", "fill_holes"});
            readPostprocessRule(r, rule, rkey, pp.labels[static_cast<int>(value)]);
        }
    }
    if (const json* x = r.member(j, key, "connectivity", false)) {
        const int64_t c = r.integer(*x, Reader::join(key, "connectivity"), 6, 26);
        if (r.ok() && c != 6 && c != 26)
            r.fail(Reader::join(key, "connectivity"), "expected 6 (faces) or 26 (default)");
        pp.fully_connected = c != 6;
    }
    if (const json* x = r.member(j, key, "grid", false)) {
        const std::string s = r.string(*x, Reader::join(key, "grid"));
        if (s == "stage")
            pp.on_stage_grid = true;
        else if (s != "input" && r.ok())
            r.fail(Reader::join(key, "grid"), "expected \"input\" or \"stage\", got \"" + s + "\"");
    }
}

// A label value of stage `stage`'s output, or an error naming the link.
bool stageHasLabel(const StageSpec& stage, int label) {
    return std::find(stage.output.labels.begin(), stage.output.labels.end(), label) !=
           stage.output.labels.end();
}

// The index of the earlier stage named `name`, or -1 with an error naming `key`.
int earlierStage(Reader& r, const ModelPackage& p, const std::string& key,
                 const std::string& name) {
    for (size_t i = 0; i < p.stages.size(); ++i)
        if (p.stages[i].name == name) return static_cast<int>(i);
    std::string names;
    for (const auto& s : p.stages) names += (names.empty() ? "" : ", ") + ("\"" + s.name + "\"");
    r.fail(key,
           "no earlier stage is named \"" + name + "\"" +
               (names.empty() ? " (this is the first stage)" : " (earlier stages: " + names + ")"));
    return -1;
}

std::string labelList(const std::vector<int>& labels) {
    std::string values;
    for (int v : labels) values += (values.empty() ? "" : ", ") + std::to_string(v);
    return values;
}

void readCropLink(Reader& r, const json& j, const std::string& key, const ModelPackage& p,
                  CropLink& link) {
    if (!r.object(j, key)) return;
    r.onlyKeys(
        j, key,
        {"stage", "rule", "label", "labels", "margin_fraction", "margin_mm", "slice_fraction"});
    if (const json* x = r.member(j, key, "stage", true))
        link.stage = r.string(*x, Reader::join(key, "stage"));
    if (const json* x = r.member(j, key, "rule", false)) {
        const std::string rule = r.string(*x, Reader::join(key, "rule"));
        if (rule == "roi_subset")
            link.rule = CropRule::kRoiSubset;
        else if (rule == "labels")
            link.rule = CropRule::kLabelSet;
        else if (rule != "label_box" && r.ok())
            r.fail(Reader::join(key, "rule"),
                   "expected \"label_box\" (deepbet's box of one label, the default), "
                   "\"roi_subset\" (TotalSegmentator's crop to the labels --labels asks for) or "
                   "\"labels\" (TotalSegmentator's crop tasks: the box of fixed labels), got \"" +
                       rule + "\"");
    }
    const bool roi = link.rule != CropRule::kLabelBox;
    if (roi) {
        const std::string why = link.rule == CropRule::kRoiSubset
                                    ? "(the box holds the labels --labels asks for, grown by "
                                      "margin_mm)"
                                    : "(the box holds the stage's \"labels\", grown by margin_mm)";
        for (const char* k : {"label", "margin_fraction", "slice_fraction"})
            if (r.ok() && j.contains(k))
                r.fail(Reader::join(key, k),
                       std::string("not used by \"rule\": \"") +
                           (link.rule == CropRule::kRoiSubset ? "roi_subset" : "labels") + "\" " +
                           why);
        if (r.ok() && link.rule == CropRule::kRoiSubset && j.contains("labels"))
            r.fail(Reader::join(key, "labels"),
                   "not used by \"rule\": \"roi_subset\" (--labels chooses them)");
        if (link.rule == CropRule::kLabelSet)
            if (const json* x = r.member(j, key, "labels", true))
                readLabelValues(r, *x, Reader::join(key, "labels"), link.labels);
    } else if (const json* x = r.member(j, key, "label", true)) {
        if (r.ok() && j.contains("labels"))
            r.fail(Reader::join(key, "labels"), "only \"rule\": \"labels\" takes a label list");
        link.label = static_cast<int>(r.integer(*x, Reader::join(key, "label"), 1, 32767));
    }
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
    link.stage_index = earlierStage(r, p, Reader::join(key, "stage"), link.stage);
    if (link.stage_index < 0) return;
    const StageSpec& from = p.stages[static_cast<size_t>(link.stage_index)];
    if (!roi && !stageHasLabel(from, link.label))
        r.fail(Reader::join(key, "label"),
               "stage \"" + link.stage + "\" produces no label " + std::to_string(link.label) +
                   " (its labels: " + labelList(from.output.labels) + ")");
    for (int v : link.labels)
        if (r.ok() && !stageHasLabel(from, v))
            r.fail(Reader::join(key, "labels"),
                   "stage \"" + link.stage + "\" produces no label " + std::to_string(v) +
                       " (its labels: " + labelList(from.output.labels) + ")");
}

void readOneHotLink(Reader& r, const json& j, const std::string& key, const ModelPackage& p,
                    OneHotLink& link) {
    if (!r.object(j, key)) return;
    r.onlyKeys(j, key, {"stage", "labels"});
    if (const json* x = r.member(j, key, "stage", true))
        link.stage = r.string(*x, Reader::join(key, "stage"));
    if (!r.ok()) return;
    link.stage_index = earlierStage(r, p, Reader::join(key, "stage"), link.stage);
    if (link.stage_index < 0) return;
    const StageSpec& from = p.stages[static_cast<size_t>(link.stage_index)];
    const json* x = r.member(j, key, "labels", false);
    if (!x) {  // nnU-Net: one channel per foreground label, ascending
        link.labels = from.output.labels;
        std::sort(link.labels.begin(), link.labels.end());
        return;
    }
    const std::string lkey = Reader::join(key, "labels");
    readLabelValues(r, *x, lkey, link.labels);
    for (size_t i = 0; i < link.labels.size() && r.ok(); ++i)
        if (!stageHasLabel(from, link.labels[i]))
            r.fail(Reader::index(lkey, i), "stage \"" + link.stage + "\" produces no label " +
                                               std::to_string(link.labels[i]) + " (its labels: " +
                                               labelList(from.output.labels) + ")");
}

// mask: {stage, label, dilate, outside} (MaskLink).
void readMaskLink(Reader& r, const json& j, const std::string& key, const ModelPackage& p,
                  MaskLink& link) {
    if (!r.object(j, key)) return;
    r.onlyKeys(j, key, {"stage", "label", "dilate", "outside"});
    if (const json* x = r.member(j, key, "stage", true))
        link.stage = r.string(*x, Reader::join(key, "stage"));
    if (const json* x = r.member(j, key, "label", true))
        link.label = static_cast<int>(r.integer(*x, Reader::join(key, "label"), 1, 32767));
    if (const json* x = r.member(j, key, "dilate", false))
        link.dilate = static_cast<int>(r.integer(*x, Reader::join(key, "dilate"), 0, 64));
    if (const json* x = r.member(j, key, "outside", true))
        link.outside = r.number(*x, Reader::join(key, "outside"));
    if (!r.ok()) return;
    link.stage_index = earlierStage(r, p, Reader::join(key, "stage"), link.stage);
    if (link.stage_index < 0) return;
    const StageSpec& from = p.stages[static_cast<size_t>(link.stage_index)];
    if (!stageHasLabel(from, link.label))
        r.fail(Reader::join(key, "label"),
               "stage \"" + link.stage + "\" produces no label " + std::to_string(link.label) +
                   " (its labels: " + labelList(from.output.labels) + ")");
}

// A post-processing rule's labels are the stage's; the stage grid is a totalsegmentator one.
void checkPostprocess(Reader& r, const std::string& key, const StageSpec& stage) {
    const std::string pkey = Reader::join(key, "postprocess");
    for (const auto& [label, rule] : stage.postprocess.labels)
        if (!stageHasLabel(stage, label))
            r.fail(Reader::join(Reader::join(pkey, "labels"), std::to_string(label)),
                   "the stage produces no label " + std::to_string(label) +
                       " (its labels: " + labelList(stage.output.labels) + ")");
    if (stage.postprocess.on_stage_grid && stage.grid != StageGrid::kTotalSegmentator)
        r.fail(Reader::join(pkey, "grid"),
               "\"stage\" needs \"grid\": \"totalsegmentator\" (TotalSegmentator's "
               "post-processing on its resampled grid)");
}

// What a mask or an output_size needs of the rest of the stage.
void checkMaskAndOutputSize(Reader& r, const std::string& key, const StageSpec& stage) {
    if (stage.mask) {
        const std::string mkey = Reader::join(key, "mask");
        if (stage.spacing_mm.empty())
            r.fail(mkey, "needs a \"spacing_mm\" stage (the mask is cut on its network grid)");
        else if (stage.one_hot_from)
            r.fail(mkey, "cannot be combined with \"one_hot_from\"");
        else if (stage.grid != StageGrid::kFieldOfView)
            r.fail(mkey, "needs the default \"grid\": \"fov\"");
        else if (stage.output.kind == StageOutputKind::kProbability)
            r.fail(mkey,
                   "needs a \"softmax\", \"sigmoid\" or \"regions\" output (logits: the "
                   "scores outside the mask's box are set to background logits)");
    }
    if (stage.normalize_first && (stage.grid != StageGrid::kFieldOfView ||
                                  stage.normalization.scheme == Normalization::Scheme::kPercentile))
        r.fail(Reader::join(key, "normalize_first"),
               "needs the default \"grid\": \"fov\" and a fixed normalisation (not "
               "\"percentile\")");
    const auto& out = stage.inference.output_size;
    if (out.empty()) return;
    const std::string okey = Reader::join(key, "inference.output_size");
    if (stage.grid != StageGrid::kFieldOfView) {
        r.fail(okey, "needs the default \"grid\": \"fov\"");
        return;
    }
    for (size_t a = 0; a < out.size() && a < stage.patch_size.size() && r.ok(); ++a) {
        const int64_t margin = stage.patch_size[a] - out[a];
        if (margin < 0 || margin % 2 != 0)
            r.fail(okey, "axis " + std::to_string(a) + ": output " + std::to_string(out[a]) +
                             " must be the centred part of the patch " +
                             std::to_string(stage.patch_size[a]) +
                             " (smaller by an even number of voxels)");
    }
}

// The result stages' labels are the package's labels, each from one stage.
void checkResultLabels(Reader& r, const ModelPackage& p, const std::vector<int>& top_labels) {
    std::set<int> produced;
    for (size_t i = 0; i < p.stages.size() && r.ok(); ++i) {
        const StageSpec& st = p.stages[i];
        if (!st.result) continue;
        const std::string okey = Reader::join(Reader::index("stages", i), "output");
        for (int v : st.output.labels) {
            if (std::find(top_labels.begin(), top_labels.end(), v) == top_labels.end())
                r.fail(okey, "stage \"" + st.name +
                                 "\" gives (part of) the result, but its label " +
                                 std::to_string(v) + " is not in \"labels\"");
            else if (!produced.insert(v).second)
                r.fail(okey, "label " + std::to_string(v) +
                                 " is produced by two result stages: each label comes from one");
        }
    }
}

// measurements: {name, kind "volume_ml", labels, description} (version 2).
void readMeasurements(Reader& r, const json& root, const std::vector<int>& top_labels,
                      ModelPackage& p) {
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

void readStages(Reader& r, const json& root, ModelPackage& p) {
    std::vector<int> top_labels;
    for (const auto& l : p.labels) top_labels.push_back(l.value);
    const json* stages = r.member(root, "", "stages", true);
    if (!stages || !r.array(*stages, "stages", "stage objects")) return;
    if (stages->empty()) r.fail("stages", "must list at least one stage");
    if (stages->size() > kMaxStages)
        r.fail("stages", fmt::format("lists {} stages > limit {} stages (core/limits.h)",
                                     stages->size(), kMaxStages));
    std::set<std::string> names;
    for (size_t i = 0; i < stages->size() && r.ok(); ++i) {
        const std::string key = Reader::index("stages", i);
        const json& st = (*stages)[i];
        if (!r.object(st, key)) return;
        r.onlyKeys(
            st, key,
            {"name", "file", "sha256", "crop_to", "one_hot_from", "result", "shape", "spacing_mm",
             "patch_size", "interpolation", "grid", "slabs", "statistics_on_stage_grid",
             "normalization", "output", "postprocess", "inference", "mask", "normalize_first"});
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
        if (const json* x = r.member(st, key, "one_hot_from", false)) {
            OneHotLink link;
            readOneHotLink(r, *x, Reader::join(key, "one_hot_from"), p, link);
            stage.one_hot_from = link;
        }
        if (const json* x = r.member(st, key, "normalize_first", false))
            stage.normalize_first = r.boolean(*x, Reader::join(key, "normalize_first"));
        if (const json* x = r.member(st, key, "mask", false)) {
            MaskLink link;
            readMaskLink(r, *x, Reader::join(key, "mask"), p, link);
            stage.mask = link;
        }
        if (const json* x = r.member(st, key, "grid", false)) readStageGrid(r, *x, key, stage);
        if (const json* x = r.member(st, key, "slabs", false)) {
            stage.slabs = r.boolean(*x, Reader::join(key, "slabs"));
            if (r.ok() && stage.slabs && stage.grid != StageGrid::kTotalSegmentator)
                r.fail(Reader::join(key, "slabs"),
                       "TotalSegmentator's slab split needs \"grid\": \"totalsegmentator\"");
        }
        if (const json* x = r.member(st, key, "statistics_on_stage_grid", false)) {
            stage.statistics_on_stage_grid =
                r.boolean(*x, Reader::join(key, "statistics_on_stage_grid"));
            if (r.ok() && stage.statistics_on_stage_grid &&
                stage.grid != StageGrid::kTotalSegmentator)
                r.fail(Reader::join(key, "statistics_on_stage_grid"),
                       "needs \"grid\": \"totalsegmentator\" (TotalSegmentator --fast's "
                       "statistics on its resampled grid)");
        }
        if (const json* x = r.member(st, key, "result", false)) {
            stage.result = r.boolean(*x, Reader::join(key, "result"));
            if (r.ok() && !stage.result && i + 1 == stages->size())
                r.fail(Reader::join(key, "result"),
                       "the last stage always gives (part of) the result");
        }
        if (i + 1 == stages->size()) stage.result = true;
        if (r.ok()) checkMaskAndOutputSize(r, key, stage);
        if (r.ok()) checkPostprocess(r, key, stage);
        if (!r.ok()) return;
        p.stages.push_back(stage);
        p.models.push_back(stage.model);
    }
    if (!r.ok()) return;
    checkResultLabels(r, p, top_labels);
    if (!r.ok()) return;
    const StageSpec& last = p.stages.back();
    p.output =
        last.output.kind == StageOutputKind::kSoftmax ? OutputKind::kSoftmax : OutputKind::kSigmoid;
    const StageSpec& first = p.stages.front();
    p.patch_size = first.patch();
    p.spacing_mm = first.spacing_mm;

    readMeasurements(r, root, top_labels, p);
}

json stageJson(const StageSpec& st) {
    json j{{"name", st.name}, {"file", st.model.file}, {"sha256", st.model.sha256}};
    if (st.crop_to) {
        const CropLink& c = *st.crop_to;
        if (c.rule == CropRule::kRoiSubset)
            j["crop_to"] = {{"stage", c.stage}, {"rule", "roi_subset"}, {"margin_mm", c.margin_mm}};
        else if (c.rule == CropRule::kLabelSet)
            j["crop_to"] = {{"stage", c.stage},
                            {"rule", "labels"},
                            {"labels", c.labels},
                            {"margin_mm", c.margin_mm}};
        else
            j["crop_to"] = {{"stage", c.stage},
                            {"label", c.label},
                            {"margin_fraction", c.margin_fraction},
                            {"margin_mm", c.margin_mm},
                            {"slice_fraction", c.slice_fraction}};
    }
    if (st.one_hot_from)
        j["one_hot_from"] = {{"stage", st.one_hot_from->stage},
                             {"labels", st.one_hot_from->labels}};
    if (st.normalize_first) j["normalize_first"] = true;
    if (st.mask)
        j["mask"] = {{"stage", st.mask->stage},
                     {"label", st.mask->label},
                     {"dilate", st.mask->dilate},
                     {"outside", st.mask->outside}};
    if (st.result) j["result"] = true;
    if (!st.shape.empty()) {
        j["shape"] = st.shape;
    } else {
        j["spacing_mm"] = st.spacing_mm;
        j["patch_size"] = st.patch_size;
        j["inference"] = inferenceJson(st.inference);
    }
    j["interpolation"] = interpolationName(st.interpolation);
    if (st.grid == StageGrid::kMonai) j["grid"] = "monai";
    if (st.grid == StageGrid::kTotalSegmentator) j["grid"] = "totalsegmentator";
    if (st.slabs) j["slabs"] = true;
    if (st.statistics_on_stage_grid) j["statistics_on_stage_grid"] = true;
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
        case StageOutputKind::kRegions:
            out = {{"kind", "regions"},
                   {"regions", st.output.regions},
                   {"regions_class_order", st.output.labels}};
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
    auto rule = [](const PostprocessRule& pp) {
        const char* fill = pp.fill_holes == FillHoles::k3D         ? "3d"
                           : pp.fill_holes == FillHoles::kPerSlice ? "slices"
                                                                   : "none";
        return json{{"largest_component", pp.largest_component},
                    {"min_component_ml", pp.min_component_ml},
                    {"fill_holes", fill}};
    };
    json pp = rule(st.postprocess);
    if (!st.postprocess.labels.empty()) {
        json labels = json::object();
        for (const auto& [label, r] : st.postprocess.labels)
            labels[std::to_string(label)] = rule(r);
        pp["labels"] = labels;
    }
    pp["connectivity"] = st.postprocess.fully_connected ? 26 : 6;
    pp["grid"] = st.postprocess.on_stage_grid ? "stage" : "input";
    j["postprocess"] = pp;
    return j;
}

Result<Graph> importStageGraph(const std::filesystem::path& folder, const ModelPackage& p,
                               size_t stage) {
    const StageSpec& st = p.stages.at(stage);
    Shape input = {1, st.inputChannels(p.channels.size())};
    const auto patch = st.patch();
    input.insert(input.end(), patch.begin(), patch.end());
    Shape expected = input;
    expected[1] = st.outputChannels();
    if (!st.inference.output_size.empty())  // a 'valid' network: the centred part
        std::copy(st.inference.output_size.begin(), st.inference.output_size.end(),
                  expected.begin() + 2);
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
    return graph;
}

// Imports a version 2 package's stage networks (one per stage) and checks their shapes.
Status loadStages(const std::filesystem::path& folder, LoadedModel& model) {
    for (size_t s = 0; s < model.package.stages.size(); ++s) {
        VOXSEG_ASSIGN_OR_RETURN(Graph graph, importStageGraph(folder, model.package, s));
        model.graphs.push_back(std::move(graph));
    }
    return Status::ok();
}

}  // namespace voxseg::engine::detail
