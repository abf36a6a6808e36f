// Irregular stacks of the real data (label "data"): every tilted, unevenly spaced or gapped
// series in ../shared/data is loaded, and each of its acquired pixels is looked up on the
// resampled grid (tests/io/acquired_sampling.h): all inside, every value within the range of
// the acquired values around it. Regression: the earlier grid spanned only the slice centres
// along the table axis and lost 13.5 % of the GE tilted head CT's pixels.
#include "io/dicom_series.h"
#include "tests/io/acquired_sampling.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace voxseg::io {
namespace {

using voxseg::testing::sharedData;

TEST(DicomResampleData, EveryAcquiredPixelOfEveryIrregularSeriesIsOnTheGrid) {
    VOXSEG_REQUIRE_DATA("dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing");
    int irregular = 0;
    bool saw_tilt = false;
    for (const auto& entry : std::filesystem::directory_iterator(sharedData())) {
        if (!entry.is_directory()) continue;
        auto scan = scanDicom({entry.path().string()});
        if (!scan.isOk()) continue;  // no DICOM image series in this folder
        for (const SeriesCandidate& c : scan->series) {
            if (!c.has_patient_geometry || !(c.tilted || c.uneven_spacing || c.has_gaps)) continue;
            auto loaded = loadSeries(c);
            ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
            const Volume acquired = voxseg::testing::loadAcquired(c);
            ASSERT_FALSE(acquired.empty());
            // Integral inputs come back rounded to int16: half a unit of rounding.
            const auto s = voxseg::testing::sampleAcquiredPixels(c, acquired, *loaded, 0.5 + 1e-3);
            const Geometry g = loaded->geometry();
            std::printf(
                "%s [%d]%s%s%s: %zu slices -> %lldx%lldx%lld; %lld pixels, %lld outside, "
                "%lld out of range (worst %.3g), mean |error| %.3g\n",
                entry.path().filename().c_str(), c.index, c.tilted ? " tilted" : "",
                c.uneven_spacing ? " uneven" : "", c.has_gaps ? " gaps" : "", c.slices.size(),
                static_cast<long long>(g.size[0]), static_cast<long long>(g.size[1]),
                static_cast<long long>(g.size[2]), static_cast<long long>(s.pixels),
                static_cast<long long>(s.outside), static_cast<long long>(s.out_of_range),
                s.worst_excess, s.mean_abs_error);
            EXPECT_EQ(s.outside, 0) << c.series_uid;
            EXPECT_EQ(s.out_of_range, 0) << c.series_uid;
            ++irregular;
            saw_tilt |= c.tilted;
        }
    }
    EXPECT_GE(irregular, 2);  // at least the GE tilted CT and a gapped series
    EXPECT_TRUE(saw_tilt);
}

}  // namespace
}  // namespace voxseg::io
