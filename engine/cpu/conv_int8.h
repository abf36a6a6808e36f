// INT8 3-D convolution on oneDNN (issue 40, docs/int8.md): u8 activations with a per-tensor
// scale and zero point, s8 weights with per-output-channel scales, s32 accumulation, and the
// requantisation to u8 in oneDNN's output scales, zero points and post-ops (bias, residual add
// as the sum post-op, ReLU/LeakyReLU), so that one pass over memory does it all. A normalisation's
// input is written as s8 with per-channel scales instead (spec.dst_s8; always ndhwc). It computes
// the rule of engine/quant/int8_scheme.h bit for bit (the reference:
// engine/quant/int8_conv_reference.h).
//
// Weights must stay within +-kWeightQmaxNoVnni (63) on CPUs without VNNI, or oneDNN's AVX2
// kernel saturates pairs of products in s16 (int8_scheme.h). Internal to the CPU backend.
// Thread safety: create() once; execute() from one thread at a time.
#pragma once

#include "core/status.h"
#include "engine/quant/int8_scheme.h"

#include <dnnl.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace voxseg::engine::cpu {

class Int8Conv {
  public:
    // `src_hint`: the layout the producer wrote, kept when oneDNN's implementation takes it (a
    // zero descriptor: oneDNN chooses). Weights are O I kD kH kW, reordered once here.
    static Result<Int8Conv> create(const dnnl::engine& engine, const quant::Int8ConvSpec& spec,
                                   const quant::Int8Weights& weights,
                                   const dnnl::memory::desc& src_hint = {});

    dnnl::memory::desc srcDesc() const;
    dnnl::memory::desc dstDesc() const;
    // oneDNN's implementation name ("jit_uni_int8:avx2", ...).
    std::string implementation() const;
    // dst <- conv(src); with spec.residual, dst holds the residual's u8 values on entry.
    void execute(const dnnl::stream& stream, const dnnl::memory& src,
                 const dnnl::memory& dst) const;

    // For a caller that schedules the primitive itself (the cpu backend's plan): the primitive
    // (user scratchpad of scratchpadDesc()), and its arguments fixed at create() (weights, bias,
    // zero points) as (DNNL_ARG_*, memory); they stay valid while this object or a copy lives.
    dnnl::primitive primitive() const;
    dnnl::memory::desc scratchpadDesc() const;
    std::vector<std::pair<int, dnnl::memory>> constantArgs() const;

  private:
    struct State;
    std::shared_ptr<State> state_;
};

// f32 -> u8 with `q` (x * (1 / scale) + zero point, rounded half to even, saturated): the
// quantising reorder between a float producer and an int8 convolution, in any layouts.
Result<dnnl::reorder> makeQuantizeReorder(const dnnl::engine& engine,
                                          const dnnl::memory::desc& f32_md,
                                          const dnnl::memory::desc& u8_md,
                                          const quant::ActivationQuant& q);
// u8 -> f32: (q - zero point) * scale.
Result<dnnl::reorder> makeDequantizeReorder(const dnnl::engine& engine,
                                            const dnnl::memory::desc& u8_md,
                                            const dnnl::memory::desc& f32_md,
                                            const quant::ActivationQuant& q);

}  // namespace voxseg::engine::cpu
