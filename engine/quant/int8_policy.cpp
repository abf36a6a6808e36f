// Which layers run in int8 (int8_policy.h).
#include "engine/quant/int8_policy.h"

#include "engine/passes/fold_upsampling.h"
#include "engine/passes/optimize.h"

#include <algorithm>
#include <optional>
#include <set>

namespace voxseg::engine::quant {

bool int8EligibleConv(const Graph& g, const Node& n) {
    if (n.op != OpKind::kConv || n.conv.spatial_rank != 3 || n.conv.group != 1) return false;
    if (n.inputs.size() < 2 || n.inputs[0] < 0 || g.isConstant(n.inputs[0])) return false;
    if (!g.isConstant(n.inputs[1])) return false;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !g.isConstant(n.inputs[2])) return false;
    for (int64_t d : n.conv.dilations)
        if (d != 1) return false;
    return n.outputs.size() == 1 && n.outputs[0] >= 0;
}

bool int8EligibleUpsampling(const Graph& g, const Node& n) {
    const ConvAttrs& c = n.conv;
    if (n.op != OpKind::kConvTranspose || c.spatial_rank != 3 || c.group != 1 ||
        c.kernel.size() != 3 || n.fused_residual >= 0 ||
        n.fused_activation != ActivationKind::kNone)
        return false;
    if (n.inputs.size() < 2 || n.inputs[0] < 0 || g.isConstant(n.inputs[0])) return false;
    if (!g.isConstant(n.inputs[1])) return false;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !g.isConstant(n.inputs[2])) return false;
    auto at = [](const std::vector<int64_t>& v, size_t i, int64_t unset) {
        return v.empty() ? unset : v[i];
    };
    for (size_t i = 0; i < 3; ++i)
        if (at(c.strides, i, 1) != c.kernel[i] || at(c.dilations, i, 1) != 1 ||
            at(c.pads_begin, i, 0) != 0 || at(c.pads_end, i, 0) != 0 ||
            at(c.output_padding, i, 0) != 0)
            return false;
    return n.outputs.size() == 1 && n.outputs[0] >= 0;
}

namespace {

std::vector<Int8ConvCandidate> candidatesOfOptimised(const Graph& g) {
    std::vector<Int8ConvCandidate> out;
    for (const Node& n : g.nodes)
        if (int8EligibleConv(g, n)) out.push_back({n.name, g.values[n.inputs[0]].name});
    return out;
}

bool isOutput(const Graph& g, ValueId v) {
    return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

// Every use of `v`: operands, fused residuals and PReLU slopes, graph outputs.
int uses(const Graph& g, ValueId v) {
    int k = isOutput(g, v) ? 1 : 0;
    for (const Node& n : g.nodes) {
        for (ValueId in : n.inputs) k += in == v;
        k += (n.fused_residual == v) + (n.fused_prelu_slope == v);
    }
    return k;
}

bool isNorm(const Node& n) { return n.op == OpKind::kInstanceNorm || n.op == OpKind::kGroupNorm; }

// The normalisation that alone reads eligible Conv `conv`'s output as its input (the structural
// part of Int8NormInput), or -1.
int soleNormReader(const Graph& g, const Node& conv) {
    if (conv.fused_residual >= 0 || conv.fused_activation != ActivationKind::kNone) return -1;
    const ValueId y = conv.outputs[0];
    if (uses(g, y) != 1) return -1;
    for (size_t i = 0; i < g.nodes.size(); ++i)
        if (isNorm(g.nodes[i]) && g.nodes[i].inputs[0] == y) return static_cast<int>(i);
    return -1;
}

bool normCancelsBias(const Graph& g, const Node& norm) {
    const int64_t channels = g.values[norm.inputs[0]].shape[1];
    return norm.op == OpKind::kInstanceNorm || norm.norm.num_groups == channels;
}

}  // namespace

std::vector<Int8NormInput> int8NormInputs(const Graph& graph,
                                          const std::vector<std::string>& float_layers) {
    const Graph g = optimize(graph);
    const std::set<std::string> floats(float_layers.begin(), float_layers.end());
    auto int8Conv = [&](const Node& n) { return int8EligibleConv(g, n) && !floats.count(n.name); };
    std::vector<Int8NormInput> out;
    for (const Node& conv : g.nodes) {
        if (!int8Conv(conv)) continue;
        const int ni = soleNormReader(g, conv);
        if (ni < 0) continue;
        const Node& norm = g.nodes[static_cast<size_t>(ni)];
        Int8NormInput in{g.values[conv.outputs[0]].name,
                         conv.name,
                         norm.name,
                         g.values[conv.outputs[0]].shape[1],
                         {}};
        if (normCancelsBias(g, norm) && conv.inputs.size() > 2 && conv.inputs[2] >= 0)
            in.dropped_bias = g.constant(conv.inputs[2]).toFloats();
        out.push_back(std::move(in));
    }
    return out;
}

std::vector<Int8ConvCandidate> int8ConvCandidates(const Graph& graph) {
    return candidatesOfOptimised(optimize(graph));
}

std::vector<std::string> defaultInt8FloatLayers(const Graph& graph) {
    return int8FloatLayers(graph, {});
}

std::vector<std::string> int8FloatLayers(const Graph& graph, Int8FloatEnds ends) {
    const auto c = int8ConvCandidates(graph);
    std::vector<std::string> out;
    if (c.empty()) return out;
    if (ends.first) out.push_back(c.front().node);
    if (ends.last && (c.size() > 1 || !ends.first)) out.push_back(c.back().node);
    return out;
}

std::optional<Int8FloatEnds> parseInt8FloatEnds(const std::string& name) {
    if (name == "first,last" || name == "last,first") return Int8FloatEnds{true, true};
    if (name == "first") return Int8FloatEnds{true, false};
    if (name == "last") return Int8FloatEnds{false, true};
    if (name == "none") return Int8FloatEnds{false, false};
    return std::nullopt;
}

std::vector<std::string> int8CandidateTensors(const Graph& graph,
                                              const std::vector<std::string>& float_layers,
                                              bool upsampling) {
    const std::set<std::string> floats(float_layers.begin(), float_layers.end());
    std::vector<std::string> out;
    const Graph g = optimize(graph);
    for (const Node& n : g.nodes) {
        if (!(int8EligibleConv(g, n) || (upsampling && int8EligibleUpsampling(g, n))) ||
            floats.count(n.name))
            continue;
        const std::string& input = g.values[n.inputs[0]].name;
        if (std::find(out.begin(), out.end(), input) == out.end()) out.push_back(input);
    }
    return out;
}

std::set<std::string> int8LeakyReluOutputs(const Graph& graph) {
    std::set<std::string> out;
    for (const Node& n : graph.nodes) {
        const bool leaky =
            (n.op == OpKind::kLeakyRelu && n.alpha >= 0.0f && n.alpha <= kSmallNegativeShare) ||
            (n.fused_activation == ActivationKind::kLeakyRelu && n.fused_alpha >= 0.0f &&
             n.fused_alpha <= kSmallNegativeShare);
        if (leaky && !n.outputs.empty()) out.insert(graph.values[n.outputs[0]].name);
    }
    return out;
}

Int8ConvSpec int8ConvGeometry(const Node& n, const Shape& xs) {
    Int8ConvSpec s;
    s.batch = xs[0];
    s.in_channels = xs[1];
    s.out_channels = n.conv.out_channels;
    for (int i = 0; i < 3; ++i) {
        s.in_size[i] = xs[2 + i];
        s.kernel[i] = n.conv.kernel[i];
        s.strides[i] = n.conv.strides.empty() ? 1 : n.conv.strides[i];
        s.pads_begin[i] = n.conv.pads_begin.empty() ? 0 : n.conv.pads_begin[i];
        s.pads_end[i] = n.conv.pads_end.empty() ? 0 : n.conv.pads_end[i];
    }
    if (n.fused_activation == ActivationKind::kRelu) {
        s.activation = Int8Activation::kRelu;
    } else if (n.fused_activation == ActivationKind::kLeakyRelu) {
        s.activation = Int8Activation::kLeakyRelu;
        s.alpha = n.fused_alpha;
    }
    return s;
}

int64_t tapChannels(const Int8ConvSpec& spec) {
    for (int i = 0; i < 3; ++i)
        if (spec.strides[i] != 1 || spec.pads_begin[i] + spec.pads_end[i] != spec.kernel[i] - 1)
            return 0;
    if (spec.kernel[2] > 4) return 0;
    const int64_t k = spec.in_channels * spec.kernel[0] * spec.kernel[1] * 4;
    return k <= 96 ? k : 0;
}

namespace {

// Halo sources (Int8Layer::halo_lo / halo_hi): the padding every int8 Conv reading norm `i`'s u8
// shares, or nullopt (an int8 up-sampling reads it, the Convs' paddings differ, none pads).
std::optional<std::pair<std::array<int64_t, 3>, std::array<int64_t, 3>>> sharedHalo(
    const Graph& g, const std::vector<Int8Layer>& plan, size_t i) {
    const ValueId y = g.nodes[i].outputs[0];
    std::optional<std::pair<std::array<int64_t, 3>, std::array<int64_t, 3>>> pads;
    for (size_t r = 0; r < g.nodes.size(); ++r) {
        const Node& m = g.nodes[r];
        if (m.inputs.empty() || m.inputs[0] != y) continue;
        if (plan[r].int8_upsample) return std::nullopt;
        if (!plan[r].int8) continue;
        const Int8ConvSpec s = int8ConvGeometry(m, g.values[y].shape);
        if (pads && (pads->first != s.pads_begin || pads->second != s.pads_end))
            return std::nullopt;
        pads = std::make_pair(s.pads_begin, s.pads_end);
    }
    if (!pads ||
        (pads->first == std::array<int64_t, 3>{} && pads->second == std::array<int64_t, 3>{}))
        return std::nullopt;
    return pads;
}

// int8LayerPlan's passes, in order: each reads what the ones before it decided.
class LayerPlanner {
  public:
    LayerPlanner(const Graph& g, const QuantizationRecord& record, Int8Backend backend)
        : g_(g),
          record_(record),
          backend_(backend),
          floats_(record.float_layers.begin(), record.float_layers.end()),
          plan_(g.nodes.size()),
          readers_(g.values.size(), 0),
          int8_readers_(g.values.size(), 0) {}

    std::vector<Int8Layer> run() {
        markInt8Convs();
        countReaders();
        markU8Outputs();
        if (backend_.upsampling && record_.int8_upsampling) markInt8Upsamplings();
        markQuantisingNorms();
        markSkipConcats();
        markUpsamplingsIntoConcats();
        if (backend_.halo_sources) {
            markHaloSources();
            markTapChannels();
        }
        markS8NormInputs();
        return std::move(plan_);
    }

  private:
    const ActivationQuant* activation(ValueId v) const {
        const auto it = record_.activations.find(g_.values[v].name);
        return it == record_.activations.end() ? nullptr : &it->second;
    }

    void markInt8Convs() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            const Node& n = g_.nodes[i];
            // A folded up-sampling's parity convolution (passes/fold_upsampling.h) is the
            // up-sampling: int8 where an int8 up-sampling would be; float where its layer is.
            const std::string layer = passes::foldedLayerName(n.name);
            if (layer != n.name && !(backend_.upsampling && record_.int8_upsampling)) continue;
            if (!int8EligibleConv(g_, n) || floats_.count(layer)) continue;
            const ActivationQuant* src = activation(n.inputs[0]);
            if (!src) continue;
            plan_[i].int8 = true;
            plan_[i].src = *src;
        }
    }

    // Readers of every value, and those that are int8 Convs reading it as their source (not as
    // a residual).
    void countReaders() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            const Node& n = g_.nodes[i];
            for (size_t k = 0; k < n.inputs.size(); ++k)
                if (n.inputs[k] >= 0) {
                    ++readers_[n.inputs[k]];
                    if (k == 0 && plan_[i].int8) ++int8_readers_[n.inputs[k]];
                }
            if (n.fused_residual >= 0) ++readers_[n.fused_residual];
            if (n.fused_prelu_slope >= 0) ++readers_[n.fused_prelu_slope];
        }
    }

    // u8 outputs: every reader an int8 Conv reading it as its source.
    void markU8Outputs() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            const Node& n = g_.nodes[i];
            if (!plan_[i].int8) continue;
            const ValueId y = n.outputs[0];
            const bool simple_epilogue =
                n.fused_residual < 0 && (n.fused_activation == ActivationKind::kNone ||
                                         n.fused_activation == ActivationKind::kRelu ||
                                         n.fused_activation == ActivationKind::kLeakyRelu);
            const ActivationQuant* dst = activation(y);
            if (!simple_epilogue || isOutput(g_, y) || readers_[y] == 0 ||
                readers_[y] != int8_readers_[y] || !dst)
                continue;
            plan_[i].dst_u8 = true;
            plan_[i].dst = *dst;
        }
    }

    // A concat read only by int8 Convs quantises its inputs into its u8 output.
    bool quantisingConcat(const Node& n) const {
        const ValueId y = n.outputs[0];
        return n.op == OpKind::kConcat && int8_readers_[y] > 0 && !isOutput(g_, y) &&
               readers_[y] == int8_readers_[y] && n.fused_activation == ActivationKind::kNone &&
               activation(y);
    }

    // int8 up-sampling: a k = s ConvTranspose with a calibrated input, read only by such a
    // concat.
    void markInt8Upsamplings() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            const Node& n = g_.nodes[i];
            if (!int8EligibleUpsampling(g_, n) || floats_.count(n.name)) continue;
            const ActivationQuant* src = activation(n.inputs[0]);
            const ValueId y = n.outputs[0];
            if (!src || isOutput(g_, y) || readers_[y] != 1) continue;
            for (const Node& m : g_.nodes)
                if (std::find(m.inputs.begin(), m.inputs.end(), y) != m.inputs.end() &&
                    quantisingConcat(m)) {
                    plan_[i].int8_upsample = true;
                    plan_[i].src = *src;
                    ++int8_readers_[n.inputs[0]];
                }
        }
    }

    // Normalisations feeding int8 Convs (or up-samplings) quantise their result in their own
    // pass.
    void markQuantisingNorms() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            const Node& n = g_.nodes[i];
            if (!isNorm(n) && !quantisingConcat(n)) continue;
            const ValueId y = n.outputs[0];
            const ActivationQuant* dst = activation(y);
            if (int8_readers_[y] == 0 || !dst) continue;
            plan_[i].dst_u8 = true;
            plan_[i].dst = *dst;
            plan_[i].keep_float = isOutput(g_, y) || readers_[y] != int8_readers_[y];
        }
    }

    // Skip connections: a norm's float read only by quantising concats becomes their u8.
    void markSkipConcats() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            if (!isNorm(g_.nodes[i]) || !plan_[i].dst_u8 || !plan_[i].keep_float) continue;
            const ValueId y = g_.nodes[i].outputs[0];
            if (isOutput(g_, y)) continue;
            std::optional<ActivationQuant> concat;
            bool only_concats = true;
            for (size_t r = 0; r < g_.nodes.size() && only_concats; ++r) {
                const Node& m = g_.nodes[r];
                if (m.fused_residual == y || m.fused_prelu_slope == y) only_concats = false;
                for (size_t k = 0; k < m.inputs.size() && only_concats; ++k) {
                    if (m.inputs[k] != y || (k == 0 && (plan_[r].int8 || plan_[r].int8_upsample)))
                        continue;
                    const ActivationQuant& d = plan_[r].dst;
                    only_concats =
                        m.op == OpKind::kConcat && plan_[r].dst_u8 && !plan_[r].keep_float &&
                        (!concat ||
                         (concat->scale == d.scale && concat->zero_point == d.zero_point));
                    concat = d;
                }
            }
            if (!only_concats || !concat) continue;
            plan_[i].keep_float = false;
            plan_[i].concat_u8 = true;
            plan_[i].concat_dst = *concat;
        }
    }

    // Up-sampling into a skip concat: a ConvTranspose read only by one quantising concat writes
    // its channels of the concat's u8 itself.
    void markUpsamplingsIntoConcats() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            const Node& n = g_.nodes[i];
            if (n.op != OpKind::kConvTranspose || n.fused_residual >= 0 ||
                n.fused_activation != ActivationKind::kNone)
                continue;
            const ValueId y = n.outputs[0];
            if (isOutput(g_, y) || readers_[y] != 1) continue;
            for (size_t r = 0; r < g_.nodes.size(); ++r) {
                const Node& m = g_.nodes[r];
                if (m.op != OpKind::kConcat || !plan_[r].dst_u8 || plan_[r].keep_float ||
                    std::find(m.inputs.begin(), m.inputs.end(), y) == m.inputs.end())
                    continue;
                plan_[i].concat_u8 = true;
                plan_[i].concat_dst = plan_[r].dst;
            }
        }
    }

    // Halo sources: a norm's or a quantising channel concat's zero-pointed u8 that only int8
    // Convs padded alike read.
    void markHaloSources() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            Int8Layer& l = plan_[i];
            const bool norm = isNorm(g_.nodes[i]) && !l.concat_u8;
            const bool concat =
                g_.nodes[i].op == OpKind::kConcat && g_.nodes[i].axis == 1 && !l.keep_float;
            if (!(norm || concat) || !l.dst_u8 || l.dst.zero_point == 0) continue;
            if (const auto pads = sharedHalo(g_, plan_, i)) {
                l.halo_lo = pads->first;
                l.halo_hi = pads->second;
            }
        }
    }

    // Tap channels: an int8 Conv that reads a graph input.
    void markTapChannels() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            const Node& n = g_.nodes[i];
            if (!plan_[i].int8 ||
                std::find(g_.inputs.begin(), g_.inputs.end(), n.inputs[0]) == g_.inputs.end())
                continue;
            plan_[i].tap_channels =
                tapChannels(int8ConvGeometry(n, g_.values[n.inputs[0]].shape)) > 0;
        }
    }

    bool int8Producer(ValueId v) const {
        for (size_t r = 0; r < g_.nodes.size(); ++r)
            if (g_.nodes[r].outputs[0] == v) return plan_[r].int8;
        return false;
    }

    // 8-bit normalisation inputs: the Conv (or the folded up-sampling's SubpixelAdd, which
    // stands for the folded Conv) writes s8, the norm reads it.
    void markS8NormInputs() {
        for (size_t i = 0; i < g_.nodes.size(); ++i) {
            const Node& n = g_.nodes[i];
            if (!plan_[i].int8 && !(n.op == OpKind::kSubpixelAdd && int8Producer(n.inputs[1])))
                continue;
            const auto it = record_.norm_inputs.find(g_.values[n.outputs[0]].name);
            if (it == record_.norm_inputs.end()) continue;
            const int ni = soleNormReader(g_, n);
            if (ni < 0 ||
                static_cast<int64_t>(it->second.size()) != g_.values[n.outputs[0]].shape[1])
                continue;
            Int8Layer& conv = plan_[i];
            Int8Layer& norm = plan_[static_cast<size_t>(ni)];
            conv.dst_s8 = norm.src_s8 = true;
            conv.s8_scales = norm.s8_scales = it->second;
            conv.drop_bias = normCancelsBias(g_, g_.nodes[static_cast<size_t>(ni)]);
        }
    }

    const Graph& g_;
    const QuantizationRecord& record_;
    const Int8Backend backend_;
    const std::set<std::string> floats_;
    std::vector<Int8Layer> plan_;
    std::vector<int> readers_, int8_readers_;
};

}  // namespace

std::vector<Int8Layer> int8LayerPlan(const Graph& g, const QuantizationRecord& record,
                                     Int8Backend backend) {
    return LayerPlanner(g, record, backend).run();
}

}  // namespace voxseg::engine::quant
