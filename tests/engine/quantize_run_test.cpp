// engine/cpu/quantize_run.h: runs of float32 and bf16 values quantised to u8 exactly as oneDNN's
// quantising reorder (makeQuantizeReorder, which the concat's own quantising step runs) and
// quant::quantizeActivation, also at rounding ties, where one fused multiply-add would differ.
#include "engine/cpu/quantize_run.h"
#include "engine/cpu/conv_int8.h"
#include "engine/graph/tensor.h"
#include "engine/quant/int8_scheme.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace voxseg::engine::cpu {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// oneDNN's quantising reorder of `x` ([rows, 32] row-major, float32).
std::vector<uint8_t> onednnQuantize(const std::vector<float>& x, const quant::ActivationQuant& q) {
    const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(eng);
    const dnnl::memory::dims dims{static_cast<int64_t>(x.size()) / 32, 32};
    dnnl::memory src({dims, dt::f32, tag::ab}, eng, const_cast<float*>(x.data()));
    std::vector<uint8_t> out(x.size());
    dnnl::memory dst({dims, dt::u8, tag::ab}, eng, out.data());
    auto reorder = makeQuantizeReorder(eng, src.get_desc(), dst.get_desc(), q);
    EXPECT_TRUE(reorder.isOk()) << reorder.status().message();
    if (!reorder.isOk()) return {};
    reorder->execute(stream, src, dst);
    stream.wait();
    return out;
}

// Values on both sides of every rounding tie of the u8 range (k + 0.5 after scale and zero
// point, a few float steps either way), then random ones; a multiple of 32 in all.
std::vector<float> nearTies(const quant::ActivationQuant& q) {
    std::vector<float> x;
    for (int k = -3; k < 258; ++k) {
        const float tie =
            (static_cast<float>(k) + 0.5f - static_cast<float>(q.zero_point)) * q.scale;
        float v = tie;
        for (int i = 0; i < 4; ++i) v = std::nextafter(v, -1e30f);
        for (int i = 0; i < 9; ++i, v = std::nextafter(v, 1e30f)) x.push_back(v);
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-12.0f, 12.0f);
    while (x.size() % 32 != 0 || x.size() < 4096) x.push_back(u(rng));
    return x;
}

TEST(QuantizeRun, Float32EqualsTheOnednnReorderAtTies) {
    const quant::ActivationQuant q{0.0371f, 37};
    const std::vector<float> x = nearTies(q);
    const std::vector<uint8_t> ref = onednnQuantize(x, q);
    ASSERT_EQ(ref.size(), x.size());
    std::vector<uint8_t> got(x.size());
    // Odd run lengths too: the SSE2 steps and the scalar tail.
    for (size_t i = 0; i < x.size();) {
        const int64_t n = std::min<int64_t>(static_cast<int64_t>(x.size() - i), 37);
        quantizeRun(x.data() + i, got.data() + i, n, 1.0f / q.scale,
                    static_cast<float>(q.zero_point));
        i += static_cast<size_t>(n);
    }
    size_t differ = 0, reference = 0, fused = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        differ += got[i] != ref[i];
        reference += got[i] != quant::quantizeActivation(x[i], q);
        fused += quant::roundToU8(std::fma(x[i], 1.0f / q.scale, 37.0f)) != ref[i];
    }
    EXPECT_EQ(differ, 0u) << "of " << x.size() << " against oneDNN's reorder";
    EXPECT_EQ(reference, 0u) << "against quantizeActivation";
    // The inputs reach the ties: one rounding (a fused multiply-add) changes some of them.
    EXPECT_GT(fused, 0u);
}

TEST(QuantizeRun, EveryFiniteBf16EqualsTheOnednnReorder) {
    const quant::ActivationQuant q{0.0213f, 121};
    std::vector<uint16_t> h;
    std::vector<float> x;
    for (uint32_t b = 0; b < 65536; ++b) {
        const float f = bfloat16ToFloat(static_cast<uint16_t>(b));
        if (!std::isfinite(f)) continue;
        h.push_back(static_cast<uint16_t>(b));
        x.push_back(f);
    }
    while (x.size() % 32 != 0) h.push_back(0), x.push_back(0.0f);
    const std::vector<uint8_t> ref = onednnQuantize(x, q);
    ASSERT_EQ(ref.size(), x.size());
    std::vector<uint8_t> got(x.size());
    quantizeRun(h.data(), got.data(), static_cast<int64_t>(h.size()), 1.0f / q.scale,
                static_cast<float>(q.zero_point));
    size_t differ = 0, mid = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        differ += got[i] != ref[i];
        mid += ref[i] > 0 && ref[i] < 255;
    }
    EXPECT_EQ(differ, 0u) << "of " << x.size();
    EXPECT_GT(mid, 1000u) << "the values span the u8 range, not only its clamps";
}

}  // namespace
}  // namespace voxseg::engine::cpu
