#include "pipeline/preview.h"

#include "core/label_colors.h"
#include "pipeline/labels.h"

#include "test_volumes.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <itkImageFileReader.h>
#include <itkRGBPixel.h>

namespace voxseg::pipeline {
namespace {

using voxseg::testing::makeGeometry;
using voxseg::testing::makeVolume;

using Rgb = itk::RGBPixel<uint8_t>;
using RgbImage = itk::Image<Rgb, 2>;

TEST(Preview, ThreeViewsThroughTheLargestStructureInRadiologicalConvention) {
    // An RAS-stored volume (flipped rows/columns) to check the views do not depend on storage.
    const Mat3 ras = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
    const Geometry g = makeGeometry({40, 40, 30}, {1, 1, 1.5}, {20, 20, -20}, ras);
    // Patient-left sphere (x > 0 in LPS) is the largest structure (label 1, red);
    // a small right-sided one (label 2, green).
    const Vec3 left{8, 0, 0}, right{-10, 0, 0};
    Volume labels = makeVolume<uint8_t>(g, [&](const Vec3& p) {
        if (voxseg::testing::distance(p, left) < 6) return 1;
        if (voxseg::testing::distance(p, right) < 3) return 2;
        return 0;
    });
    Volume image = makeVolume<int16_t>(g, [](const Vec3&) { return 40; });  // mid-grey in W400 L40
    image.info().modality = "CT";
    voxseg::testing::TempDir dir;
    const std::vector<LabelInfo> info{{1, "left", {255, 0, 0}}, {2, "right", {0, 255, 0}}};
    auto report = writePreview(image, labels, info, dir / "preview.png");
    ASSERT_TRUE(report.isOk()) << report.status().toString();
    EXPECT_EQ(report->focus_label, 1);
    const Vec3 focus_mm = g.indexToPhysical({static_cast<double>(report->focus_index[0]),
                                             static_cast<double>(report->focus_index[1]),
                                             static_cast<double>(report->focus_index[2])});
    EXPECT_LT(voxseg::testing::distance(focus_mm, left), 1.0);

    auto reader = itk::ImageFileReader<RgbImage>::New();
    reader->SetFileName(dir / "preview.png");
    reader->Update();
    const RgbImage* png = reader->GetOutput();
    const auto size = png->GetLargestPossibleRegion().GetSize();
    EXPECT_EQ(static_cast<int>(size[0]), report->width);
    EXPECT_EQ(static_cast<int>(size[1]), report->height);
    // Axial panel (first, 40 mm wide -> its share of the width): the red sphere (patient left)
    // must be on the right half of the panel, in the middle row.
    const int panel = static_cast<int>(std::lround(40.0 / 45.0 * 320));  // 45 mm = max extent
    const int y = report->height * 20 / 45;  // A-P centre (y = 0 mm is 20 mm from the front)
    auto at = [&](int x, int yy) {
        itk::Index<2> idx{{x, yy}};
        return png->GetPixel(idx);
    };
    const int x_left_patient = panel * 28 / 40;   // x = +8 mm LPS -> 28 mm from the right edge
    const int x_right_patient = panel * 10 / 40;  // x = -10 mm -> 10 mm from the right edge
    EXPECT_GT(at(x_left_patient, y)[0], 150);
    EXPECT_LT(at(x_left_patient, y)[1], 100);
    EXPECT_GT(at(x_right_patient, y)[1], 150) << "the small right-sided label should show green";
    // Grey elsewhere.
    const Rgb corner = at(2, 2);
    EXPECT_EQ(corner[0], corner[1]);
}

TEST(Preview, MismatchedGridsAreAnError) {
    voxseg::testing::TempDir dir;
    Volume a = Volume::allocate<int16_t>(makeGeometry({4, 4, 4}, {1, 1, 1}));
    Volume b = Volume::allocate<uint8_t>(makeGeometry({5, 4, 4}, {1, 1, 1}));
    EXPECT_FALSE(writePreview(a, b, {}, dir / "p.png").isOk());
    EXPECT_FALSE(std::filesystem::exists(dir / "p.png"));
}

// Values no label describes (a plain label map, a model's undescribed output) are coloured from
// the viewer's palette in order, so the preview, the 3-D view and the viewer's table agree and
// neighbouring values are told apart (the former fixed 8-colour list had three salmon reds).
TEST(Preview, UndescribedValuesTakeTheViewersPaletteInOrder) {
    const std::vector<voxseg::Rgb>& palette = labelPalette();
    EXPECT_EQ(labelColor({}, 1), palette[0]);
    EXPECT_EQ(labelColor({}, 2), palette[1]);
    EXPECT_EQ(labelColor({}, static_cast<int>(palette.size()) + 1), palette[0]);  // wraps
    LabelInfo liver;
    liver.value = 5;
    liver.color = {10, 20, 30};
    EXPECT_EQ(labelColor({liver}, 5), (voxseg::Rgb{10, 20, 30}));
    double closest = 1e9;
    for (int a = 1; a <= 12; ++a)
        for (int b = a + 1; b <= 12; ++b)
            closest = std::min(closest, colorDifference(labelColor({}, a), labelColor({}, b)));
    EXPECT_GT(closest, 20.0) << "values 1-12 must be told apart (CIE76 Delta E)";
}
}  // namespace
}  // namespace voxseg::pipeline
