// oneDNN 2.6's int8 convolution with the requantisation of int8_scheme.h in its attributes:
// output scales (per output channel, mask 1 << 1), runtime zero points for src and dst, the sum
// post-op with the residual's scale and zero point, then the eltwise post-op. oneDNN adds the
// bias (f32, accumulator units) before the output scale, as the rule says.
#include "engine/cpu/conv_int8.h"

#include <unordered_map>
#include <vector>

namespace voxseg::engine::cpu {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::memory::dims dims3(int64_t n, int64_t c, const std::array<int64_t, 3>& s) {
    return {n, c, s[0], s[1], s[2]};
}

dnnl::memory::dims toDims(const std::array<int64_t, 3>& a) { return {a[0], a[1], a[2]}; }

dnnl::primitive_attr convAttr(const quant::Int8ConvSpec& s) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_output_scales(1 << 1, s.output_scales);
    if (s.src.zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (s.dst.zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::post_ops ops;
    if (s.residual) ops.append_sum(s.residual_scale, s.residual_quant.zero_point);
    if (s.activation == quant::Int8Activation::kRelu)
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    else if (s.activation == quant::Int8Activation::kLeakyRelu)
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, s.alpha, 0.0f);
    attr.set_post_ops(ops);
    return attr;
}

}  // namespace

struct Int8Conv::State {
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward prim;
    dnnl::memory weights, bias, scratchpad, src_zp, dst_zp;
    std::vector<float> bias_values;
    int32_t src_zp_value = 0, dst_zp_value = 0;
    bool has_bias = false;
};

Result<Int8Conv> Int8Conv::create(const dnnl::engine& engine, const quant::Int8ConvSpec& spec,
                                  const quant::Int8Weights& weights,
                                  const dnnl::memory::desc& src_hint) {
    VOXSEG_RETURN_IF_ERROR(quant::validate(spec));
    const dnnl::memory::dims w_dims = dims3(spec.out_channels, spec.in_channels, spec.kernel);
    if (weights.values.size() !=
        static_cast<size_t>(dnnl::memory::desc(w_dims, dt::s8, tag::oidhw).get_size()))
        return invalidArgument("int8 conv: weights do not match the spec's shape");
    const auto out = quant::outputSize(spec);
    auto state = std::make_shared<State>();
    state->has_bias = !spec.bias.empty();
    state->bias_values = spec.bias;
    const dnnl::memory::desc bias_md =
        state->has_bias ? dnnl::memory::desc({spec.out_channels}, dt::f32, tag::a)
                        : dnnl::memory::desc();
    // An s8 result is read by a normalisation's kernels (engine/cpu/norm_kernels.h), which walk
    // channels-last; the int8 kernels of VNNI and AMX CPUs write it natively.
    const dnnl::memory::desc dst_any(dims3(spec.batch, spec.out_channels, out),
                                     spec.dst_s8     ? dt::s8
                                     : !spec.dst_f32 ? dt::u8
                                     : spec.dst_bf16 ? dt::bf16
                                                     : dt::f32,
                                     spec.dst_s8 || spec.dst_channels_last ? tag::ndhwc : tag::any);
    const dnnl::memory::desc w_any(w_dims, dt::s8, tag::any);
    const auto attr = convAttr(spec);
    auto make = [&](const dnnl::memory::desc& src_md) {
        const dnnl::convolution_forward::desc d(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, w_any,
            bias_md, dst_any, toDims(spec.strides), toDims(spec.pads_begin), toDims(spec.pads_end));
        return dnnl::convolution_forward::primitive_desc(d, attr, engine);
    };
    try {
        const dnnl::memory::desc src_any(dims3(spec.batch, spec.in_channels, spec.in_size), dt::u8,
                                         tag::any);
        state->pd = make(src_any);
        if (src_hint != dnnl::memory::desc() && src_hint != state->pd.src_desc()) {
            try {
                auto keep = make(src_hint);
                if (std::string(keep.impl_info_str()) == state->pd.impl_info_str())
                    state->pd = keep;
            } catch (const dnnl::error&) {
                // oneDNN's own choice stays; the caller reorders.
            }
        }
        state->prim = dnnl::convolution_forward(state->pd);
        dnnl::stream stream(engine);
        dnnl::memory w_plain(dnnl::memory::desc(w_dims, dt::s8, tag::oidhw), engine,
                             const_cast<int8_t*>(weights.values.data()));
        state->weights = dnnl::memory(state->pd.weights_desc(), engine);
        dnnl::reorder(w_plain, state->weights).execute(stream, w_plain, state->weights);
        stream.wait();
        if (state->has_bias) state->bias = dnnl::memory(bias_md, engine, state->bias_values.data());
        state->scratchpad = dnnl::memory(state->pd.scratchpad_desc(), engine);
        state->src_zp_value = spec.src.zero_point;
        state->dst_zp_value = spec.dst.zero_point;
        const dnnl::memory::desc zp_md({1}, dt::s32, tag::a);
        state->src_zp = dnnl::memory(zp_md, engine, &state->src_zp_value);
        state->dst_zp = dnnl::memory(zp_md, engine, &state->dst_zp_value);
    } catch (const dnnl::error& e) {
        return unsupported(std::string("int8 conv: oneDNN has no implementation on this CPU: ") +
                           e.what());
    }
    Int8Conv conv;
    conv.state_ = std::move(state);
    return conv;
}

dnnl::memory::desc Int8Conv::srcDesc() const { return state_->pd.src_desc(); }
dnnl::memory::desc Int8Conv::dstDesc() const { return state_->pd.dst_desc(); }
std::string Int8Conv::implementation() const { return state_->pd.impl_info_str(); }

dnnl::primitive Int8Conv::primitive() const { return state_->prim; }
dnnl::memory::desc Int8Conv::scratchpadDesc() const { return state_->pd.scratchpad_desc(); }

std::vector<std::pair<int, dnnl::memory>> Int8Conv::constantArgs() const {
    std::vector<std::pair<int, dnnl::memory>> args = {{DNNL_ARG_WEIGHTS, state_->weights}};
    if (state_->has_bias) args.emplace_back(DNNL_ARG_BIAS, state_->bias);
    if (state_->src_zp_value != 0)
        args.emplace_back(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, state_->src_zp);
    if (state_->dst_zp_value != 0)
        args.emplace_back(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, state_->dst_zp);
    return args;
}

void Int8Conv::execute(const dnnl::stream& stream, const dnnl::memory& src,
                       const dnnl::memory& dst) const {
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, state_->scratchpad}};
    for (const auto& [arg, m] : constantArgs()) args[arg] = m;
    dnnl::stream s = stream;
    state_->prim.execute(s, args);
}

Result<dnnl::reorder> makeQuantizeReorder(const dnnl::engine& engine,
                                          const dnnl::memory::desc& f32_md,
                                          const dnnl::memory::desc& u8_md,
                                          const quant::ActivationQuant& q) {
    dnnl::primitive_attr attr;
    attr.set_output_scales(0, {1.0f / q.scale});
    if (q.zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {q.zero_point});
    try {
        return dnnl::reorder(dnnl::reorder::primitive_desc(engine, f32_md, engine, u8_md, attr));
    } catch (const dnnl::error& e) {
        return unsupported(std::string("int8: no quantising reorder: ") + e.what());
    }
}

Result<dnnl::reorder> makeDequantizeReorder(const dnnl::engine& engine,
                                            const dnnl::memory::desc& u8_md,
                                            const dnnl::memory::desc& f32_md,
                                            const quant::ActivationQuant& q) {
    dnnl::primitive_attr attr;
    attr.set_output_scales(0, {q.scale});
    if (q.zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {q.zero_point});
    try {
        return dnnl::reorder(dnnl::reorder::primitive_desc(engine, u8_md, engine, f32_md, attr));
    } catch (const dnnl::error& e) {
        return unsupported(std::string("int8: no dequantising reorder: ") + e.what());
    }
}

}  // namespace voxseg::engine::cpu
