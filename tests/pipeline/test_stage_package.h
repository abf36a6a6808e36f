// Tiny staged model packages (model.json format_version 2) for tests: the "network" is a 1x1x1
// convolution with weights [-1, +1] (2 output channels: -x, x), optionally followed by a
// Softmax over the channels, so its answer is known: channel 1 wins (probability > 0.5) exactly
// where the normalised input is > 0. With a "window" normalisation [lo, hi] onto [-1, 1] that is
// "intensity above (lo + hi) / 2". Built with ONNX's protobuf classes, written into a folder.
#pragma once

#include "core/sha256.h"

#include <onnx/onnx_pb.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace voxseg::testing {

// A 1x1x1 convolution [1, in, D, H, W] -> [1, out, D, H, W] with `weights` (out x in, row-major)
// and `bias` (out; empty: none): each output channel is a known affine function of the input
// channels (logits), optionally followed by a Softmax over the channels (probabilities).
inline std::string conv1x1NetworkOnnx(int64_t in_channels, int64_t out_channels,
                                      const std::vector<float>& weights,
                                      const std::vector<float>& bias, bool softmax = false) {
    onnx::ModelProto model;
    model.set_ir_version(8);
    auto* opset = model.add_opset_import();
    opset->set_domain("");
    opset->set_version(17);
    auto* g = model.mutable_graph();
    g->set_name("conv1x1");
    auto* in = g->add_input();
    in->set_name("input");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(1);
    tt->mutable_shape()->add_dim()->set_dim_value(in_channels);
    for (const char* d : {"D", "H", "W"}) tt->mutable_shape()->add_dim()->set_dim_param(d);
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : {out_channels, in_channels, int64_t{1}, int64_t{1}, int64_t{1}})
        w->add_dims(d);
    for (float v : weights) w->add_float_data(v);
    if (!bias.empty()) {
        auto* b = g->add_initializer();
        b->set_name("b");
        b->set_data_type(onnx::TensorProto_DataType_FLOAT);
        b->add_dims(out_channels);
        for (float v : bias) b->add_float_data(v);
    }
    auto* conv = g->add_node();
    conv->set_op_type("Conv");
    conv->set_name("conv");
    conv->add_input("input");
    conv->add_input("w");
    if (!bias.empty()) conv->add_input("b");
    conv->add_output(softmax ? "logits" : "out");
    auto* ks = conv->add_attribute();
    ks->set_name("kernel_shape");
    ks->set_type(onnx::AttributeProto_AttributeType_INTS);
    for (int i = 0; i < 3; ++i) ks->add_ints(1);
    if (softmax) {
        auto* sm = g->add_node();
        sm->set_op_type("Softmax");
        sm->set_name("softmax");
        sm->add_input("logits");
        sm->add_output("out");
        auto* axis = sm->add_attribute();
        axis->set_name("axis");
        axis->set_type(onnx::AttributeProto_AttributeType_INT);
        axis->set_i(1);
    }
    g->add_output()->set_name("out");
    return model.SerializeAsString();
}

// A fully convolutional [1, 1, D, H, W] -> [1, 2, D, H, W] network (spatial dims symbolic).
inline std::string thresholdNetworkOnnx(bool softmax) {
    return conv1x1NetworkOnnx(1, 2, {-1.0f, 1.0f}, {}, softmax);
}

// Writes `onnx` as `name` into `folder`; returns its sha256.
inline std::string writeOnnx(const std::filesystem::path& folder, const std::string& name,
                             const std::string& onnx) {
    std::ofstream(folder / name, std::ios::binary) << onnx;
    return *sha256File(folder / name);
}

inline std::string writeNetwork(const std::filesystem::path& folder, const std::string& name,
                                bool softmax) {
    return writeOnnx(folder, name, thresholdNetworkOnnx(softmax));
}

// Two stages on intensities above 100 (window [50, 150]): "coarse" (logits, softmax output,
// label 5, 16^3, largest component) finds the box; "fine" (probabilities, label 1, 24^3) runs on
// the box plus 10 % and fills holes. Measurement "bright_ml" = label 1's volume.
inline nlohmann::json stagePackageJson(const std::string& coarse_sha, const std::string& fine_sha) {
    using nlohmann::json;
    const json window = {{"scheme", "window"}, {"window", {50, 150}}, {"range", {-1, 1}}};
    return {{"format_version", 2},
            {"name", "staged-test"},
            {"version", "0.1"},
            {"description", "two 1x1x1 threshold networks"},
            {"license", "MIT"},
            {"citation", "none"},
            {"channels", {{{"modality", "MR"}}}},
            {"axis_order", "xyz"},
            {"orientation", "RAS"},
            {"labels", {{{"value", 1}, {"name", "bright"}, {"color", {255, 0, 0}}}}},
            {"stages",
             {{{"name", "coarse"},
               {"file", "coarse.onnx"},
               {"sha256", coarse_sha},
               {"shape", {16, 16, 16}},
               {"interpolation", "nearest-exact"},
               {"normalization", window},
               {"output", {{"kind", "softmax"}, {"labels", {5}}}},
               {"postprocess", {{"largest_component", true}}}},
              {{"name", "fine"},
               {"file", "fine.onnx"},
               {"sha256", fine_sha},
               {"crop_to", {{"stage", "coarse"}, {"label", 5}, {"margin_fraction", 0.1}}},
               {"shape", {24, 24, 24}},
               {"interpolation", "nearest-exact"},
               {"normalization", window},
               {"output", {{"kind", "probability"}, {"channels", 2}, {"channel", 1}, {"label", 1}}},
               {"postprocess", {{"largest_component", true}, {"fill_holes", "3d"}}}}}},
            {"measurements",
             {{{"name", "bright_ml"},
               {"kind", "volume_ml"},
               {"labels", {1}},
               {"description", "volume above 100"}}}}};
}

// Writes the package (with `edit` applied to its JSON) into `folder`; returns the folder.
template <typename Edit>
std::string writeStagePackage(const std::filesystem::path& folder, Edit edit) {
    std::filesystem::create_directories(folder);
    const std::string coarse = writeNetwork(folder, "coarse.onnx", false);
    const std::string fine = writeNetwork(folder, "fine.onnx", true);
    nlohmann::json j = stagePackageJson(coarse, fine);
    edit(j);
    std::ofstream(folder / "model.json") << j.dump(2);
    return folder.string();
}

inline std::string writeStagePackage(const std::filesystem::path& folder) {
    return writeStagePackage(folder, [](nlohmann::json&) {});
}

}  // namespace voxseg::testing
