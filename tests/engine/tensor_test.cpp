#include "engine/graph/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

namespace voxseg::engine {
namespace {

TEST(Tensor, ShapeBytesCloneReshape) {
    Tensor t = Tensor::fromFloats({2, 3}, {1, 2, 3, 4, 5, 6});
    EXPECT_EQ(t.numel(), 6);
    EXPECT_EQ(t.bytes(), 24u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
    Tensor r = t.reshaped({3, 2});
    r.data<float>()[0] = 9;
    EXPECT_EQ(t.data<float>()[0], 9);  // shared
    Tensor c = t.clone();
    c.data<float>()[0] = 1;
    EXPECT_EQ(t.data<float>()[0], 9);
    EXPECT_EQ(shapeToString(r.shape()), "[3, 2]");
}

// An int64 tensor without elements (an ONNX Resize's empty 'sizes') has no storage: no values,
// and no memcpy from a null pointer (UBSan, fuzz_onnx_import).
TEST(Tensor, EmptyInt64TensorGivesNoValues) {
    const Tensor t(DType::kInt64, {0});
    EXPECT_EQ(t.numel(), 0);
    EXPECT_TRUE(t.toInt64s().empty());
    EXPECT_TRUE(t.toFloats().empty());
}

TEST(Tensor, HalfAndBFloat16RoundTrip) {
    for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333333f}) {
        const float h = halfToFloat(floatToHalf(v));
        EXPECT_NEAR(h, v, std::abs(v) * 1e-3 + 1e-8) << v;
        const float b = bfloat16ToFloat(floatToBFloat16(v));
        EXPECT_NEAR(b, v, std::abs(v) * 8e-3) << v;
    }
    EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(1e6f))));
    EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
    EXPECT_EQ(floatToBFloat16(1.0f), 0x3f80);
}

}  // namespace
}  // namespace voxseg::engine
