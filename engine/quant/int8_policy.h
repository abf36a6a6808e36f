// Which layers of a graph run in int8 (issue 40, docs/int8.md "Which layers run in int8"): the
// one place that policy lives. The cpu backend's int8 plan (engine/cpu/conv_int8_plan.cpp) asks
// it per node; `voxseg model calibrate` asks it which tensors to observe
// (int8CandidateTensors, engine/activation_observer.h) and which layers stay float by default.
//
// A Conv runs in int8 when it is eligible (3-D, group 1, no dilation, constant weights and bias,
// its input computed by the graph), its input tensor has calibrated parameters in the package's
// record, and it is not in the record's float_layers. Everything else (normalisations,
// activations, resize, concat, ConvTranspose, pooling, attention) stays fp32. An int8 Conv writes
// u8 (requantised in its epilogue with the parameters of its output tensor) when every reader of
// that tensor is an int8 Conv, it is no graph output and the Conv has no fused residual and at
// most a ReLU/LeakyReLU; otherwise it writes fp32 (dequantised in its epilogue). An
// InstanceNorm or GroupNorm whose output an int8 Conv reads writes that u8 source itself, in the
// same pass (no quantising reorder), and its float32 result only for other readers; a Concat read
// only by int8 Convs writes u8 only (each input quantised into its part).
//
// Optionally (calibrate --upsampling int8: the record's int8_upsampling), where the backend takes
// it (int8LayerPlan's `upsampling`: the cpu backend), the decoder's up-sampling runs in int8 too:
// a ConvTranspose whose kernel equals its stride (int8EligibleUpsampling) read only by such a u8
// Concat, its input calibrated, runs as an int8 1x1 convolution to K * OC channels whose u8
// result, requantised with the concat's parameters, is scattered into the concat's channels
// (int8_upsample).
//
// In a graph whose up-sampling the cpu backend folded into the convolution after its concat
// (engine/passes/fold_upsampling.h), the skip half's convolution keeps the folded Conv's name
// and the parity convolution (named with kFoldedUpsamplingSuffix) runs in int8 only where an
// int8 up-sampling would; both stay float where the folded Conv is a float layer. Their outputs
// are float (SubpixelAdd reads them); SubpixelAdd, which writes the folded Conv's output, writes
// the s8 of an 8-bit normalisation input as that Conv would (dst_s8, less the Conv's bias with
// drop_bias).
//
// Optionally (calibrate --norm-inputs int8, int8_scheme.h), a Conv whose output only a
// normalisation reads writes s8 per channel for it (int8NormInputs), and the normalisation
// reads that.
//
// Graph arguments are as imported (optimize() is applied here, as every backend compiles after
// it), except int8LayerPlan's, which takes the optimised graph the backend plans. Node and tensor
// names are the optimised graph's. Pure functions; thread-safe.
#pragma once

#include "engine/graph/graph.h"
#include "engine/quant/int8_scheme.h"
#include "engine/quant/quantization_record.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace voxseg::engine::quant {

// Whether `node` of `graph` (optimised) can run as an int8 convolution.
bool int8EligibleConv(const Graph& graph, const Node& node);

// Whether `node` is a k = s ConvTranspose (kernel equal to stride, no padding, no output padding,
// no dilation, group 1, 3-D, constant weights and bias, no fused residual or activation) that can
// run as an int8 1x1 convolution and a scatter.
bool int8EligibleUpsampling(const Graph& graph, const Node& node);

// An eligible Conv: its node name and the name of the tensor it reads.
struct Int8ConvCandidate {
    std::string node;
    std::string input;
};
// The eligible Convs of optimize(graph), in graph order.
std::vector<Int8ConvCandidate> int8ConvCandidates(const Graph& graph);

// The default float_layers of a calibration: the first and the last eligible Conv (the first
// reads the raw image with few channels and costs little; the last writes the logits the labels
// come from). Empty for a graph without eligible Convs; one name when there is one.
std::vector<std::string> defaultInt8FloatLayers(const Graph& graph);

// Which of the two calibration keeps float (calibrate --keep-float): both by default; `none`
// quantises the first convolution's input (the image) and the logits' convolution too, as
// OpenVINO's NNCF does, for speed the held-back gate must accept.
struct Int8FloatEnds {
    bool first = true, last = true;
};
// The first and/or last eligible Conv, as `ends` says (defaultInt8FloatLayers for both).
std::vector<std::string> int8FloatLayers(const Graph& graph, Int8FloatEnds ends);
// --keep-float's value: "first,last" (or "last,first"), "first", "last" or "none"; nullopt for
// anything else.
std::optional<Int8FloatEnds> parseInt8FloatEnds(const std::string& name);

// The tensors calibration must observe: inputs of the eligible Convs not in `float_layers`, and
// with `upsampling` (calibrate --upsampling int8) of the eligible up-samplings, each once, in
// graph order.
std::vector<std::string> int8CandidateTensors(const Graph& graph,
                                              const std::vector<std::string>& float_layers,
                                              bool upsampling = false);

// calibrate --zero-points where-needed: the tensors that may go without a zero point, those a
// LeakyReLU with a slope of at most kSmallNegativeShare computes (a node of its own, or fused into
// the node before it, as optimize() fuses it into a normalisation): their negatives are the slope
// times the pre-activation's. Any other tensor (an image, a residual sum) keeps its zero point.
std::set<std::string> int8LeakyReluOutputs(const Graph& graph);

// A tensor that may be an 8-bit normalisation input: the output of an eligible Conv not in
// `float_layers` (no fused residual or activation, no graph output) read only by one
// InstanceNorm or GroupNorm, as its input.
struct Int8NormInput {
    std::string tensor;
    std::string conv, norm;  // node names
    int64_t channels = 0;
    // The Conv's bias, when the normalisation cancels it (InstanceNorm, or GroupNorm with one
    // channel per group): the s8 then holds the output without it. Else empty.
    std::vector<float> dropped_bias;
};
// In graph order, from optimize(graph).
std::vector<Int8NormInput> int8NormInputs(const Graph& graph,
                                          const std::vector<std::string>& float_layers);

// The geometry and fused ReLU/LeakyReLU of an eligible Conv node reading a tensor of shape
// `input` (N C D H W), as an Int8ConvSpec without scales (setRequantisation sets them).
Int8ConvSpec int8ConvGeometry(const Node& conv, const Shape& input);

// How the backend runs one node of the optimised graph under a record.
struct Int8Layer {
    bool int8 = false;    // an int8 Conv
    ActivationQuant src;  // its input's parameters
    bool dst_u8 = false;  // writes u8 with `dst` (else fp32); also set for a normalisation
    ActivationQuant dst;
    // A normalisation with dst_u8: it writes float32 too (another node reads it, or it is a graph
    // output).
    bool keep_float = false;
    // 8-bit normalisation inputs (record.norm_inputs): the Conv writes s8 with these per-channel
    // scales (dst_s8, without its bias when drop_bias), the normalisation reads them (src_s8).
    bool dst_s8 = false, drop_bias = false, src_s8 = false;
    std::vector<float> s8_scales;
    // A normalisation whose float result only quantising concats read besides its int8 Convs
    // (a skip connection): it writes the concat's u8 (`concat_dst`) instead, in the same pass,
    // and no float; the concat copies it into its channels. A ConvTranspose read only by one
    // quantising concat (the decoder's up-sampling): it may write its channels of that concat's
    // u8 in place (the cpu backend's k = s ConvTranspose does where the layouts allow).
    bool concat_u8 = false;
    ActivationQuant concat_dst;
    // An int8 up-sampling (with concat_u8): reads `src` as u8 and writes the concat's u8.
    bool int8_upsample = false;
    // Halo sources (a normalisation without concat_u8 or a quantising concat, with dst_u8 and a
    // zero point, read as u8 only by int8 Convs padded alike): it writes that u8 inside a halo
    // of its zero point, halo_lo / halo_hi wide per spatial axis (the Convs' padding; zero:
    // none); a concat's in-place writers write into its interior. A Conv reading such a
    // source runs unpadded on it, without a source zero point (its sum folded into the bias):
    // oneDNN's brgconv kernel on AMX instead of the zero-point jit one, the same accumulators.
    std::array<int64_t, 3> halo_lo{}, halo_hi{};
    // Tap channels (with halo sources): an int8 Conv on a graph input of few channels (the
    // network's first, on the image: tapChannels() of its geometry) runs as a 1x1 convolution
    // over a u8 tensor whose channels are its kernel taps, their zero point folded into the
    // bias as for a halo source: oneDNN's 1x1 brgconv instead of its jit kernel on 1 channel.
    bool tap_channels = false;
};
// The channels of a Conv's tap tensor (in_channels * kd * kh * 4: each kernel row's taps as 4
// bytes, kw <= 4 of them), or 0 where the Conv does not qualify: stride 1, the output as large as
// the input, kw <= 4, at most 96 channels (two input channels of a 3x3x3 kernel: 72).
int64_t tapChannels(const Int8ConvSpec& spec);
// What the backend's int8 plan runs beyond plain int8 Convs (the cpu backend: all of it).
struct Int8Backend {
    bool upsampling = false;    // int8_upsample layers
    bool halo_sources = false;  // halo_lo / halo_hi, tap_channels
};
// One entry per node of `graph` (optimised, shapes inferred). Without backend.upsampling, or
// without the record's int8_upsampling, every ConvTranspose stays float; without
// backend.halo_sources no u8 source gets a halo and no Conv tap channels.
std::vector<Int8Layer> int8LayerPlan(const Graph& graph, const QuantizationRecord& record,
                                     Int8Backend backend = {});

}  // namespace voxseg::engine::quant
