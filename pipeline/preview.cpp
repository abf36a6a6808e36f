#include "pipeline/preview.h"

#include "core/atomic_file.h"
#include "pipeline/orientation.h"
#include "pipeline/pixel_dispatch.h"

#include <itkImage.h>
#include <itkImageFileWriter.h>
#include <itkPNGImageIO.h>
#include <itkRGBPixel.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace voxseg::pipeline {

namespace {

using Rgb = itk::RGBPixel<uint8_t>;
using RgbImage = itk::Image<Rgb, 2>;

struct Window {
    double lo = 0;
    double hi = 1;
};

Window chooseWindow(const Volume& image) {
    if (image.info().modality == "CT") return {40.0 - 200.0, 40.0 + 200.0};
    // Percentiles of a strided sample (about 200k voxels), read in place.
    const int64_t count = image.geometry().voxelCount();
    const int64_t step = std::max<int64_t>(1, count / 200000);
    std::vector<float> sample;
    visitPixels(image, [&](auto* p) {
        for (int64_t i = 0; i < count; i += step) sample.push_back(static_cast<float>(p[i]));
    });
    if (sample.empty()) return {};
    auto at = [&](double q) {
        const size_t n = static_cast<size_t>(q * static_cast<double>(sample.size() - 1));
        std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(n),
                         sample.end());
        return static_cast<double>(sample[n]);
    };
    Window w{at(0.005), at(0.995)};
    if (!(w.hi > w.lo)) w.hi = w.lo + 1;
    return w;
}

// One view: `u_axis`/`v_axis` are LPS-grid index axes along the picture's x and y; `v_flip`
// puts high indices at the top (superior); `fixed` is the third axis' index.
struct View {
    int u_axis, v_axis, fixed_axis;
    bool v_flip;
};

}  // namespace

Result<PreviewReport> writePreview(const Volume& image, const Volume& label_map,
                                   const std::vector<LabelInfo>& labels, const std::string& path,
                                   const PreviewOptions& options) {
    if (image.empty() || label_map.empty()) return invalidArgument("preview: empty volume", path);
    if (!isLabelPixelType(label_map.pixelType()))
        return invalidArgument("preview: the label map must be uint8/uint16", path);
    if (!image.geometry().approxEqual(label_map.geometry()))
        return invalidArgument("preview: image and label map are on different grids", path);
    AtomicFile out(path);
    VOXSEG_RETURN_IF_ERROR(out.checkWritable());

    VOXSEG_ASSIGN_OR_RETURN(Volume img, reorient(image, "LPS"));
    AxisMapping mapping;
    VOXSEG_ASSIGN_OR_RETURN(Volume lab, reorient(label_map, "LPS", &mapping));
    const Geometry g = img.geometry();

    // Voxels are read in place (no whole-volume copies: this runs beside the pipeline's peak).
    auto grey_at = [&](int64_t e) {
        return visitPixels(img, [&](auto* p) { return static_cast<double>(p[e]); });
    };
    auto label_at = [&](int64_t e) {
        return visitPixels(lab, [&](auto* p) { return static_cast<int>(p[e]); });
    };

    // Largest structure and its centroid.
    std::map<int, std::pair<int64_t, std::array<double, 3>>> acc;
    visitPixels(lab, [&](auto* label_values) {
        int64_t e = 0;
        for (int64_t k = 0; k < g.size[2]; ++k)
            for (int64_t j = 0; j < g.size[1]; ++j)
                for (int64_t i = 0; i < g.size[0]; ++i, ++e) {
                    const int v = static_cast<int>(label_values[e]);
                    if (!v) continue;
                    auto& a = acc[v];
                    ++a.first;
                    a.second[0] += static_cast<double>(i);
                    a.second[1] += static_cast<double>(j);
                    a.second[2] += static_cast<double>(k);
                }
    });
    PreviewReport report;
    std::array<int64_t, 3> focus{g.size[0] / 2, g.size[1] / 2, g.size[2] / 2};
    int64_t best = 0;
    for (const auto& [v, a] : acc)
        if (a.first > best) {
            best = a.first;
            report.focus_label = v;
            for (int d = 0; d < 3; ++d)
                focus[d] = std::llround(a.second[d] / static_cast<double>(a.first));
        }
    // Report the focus in the caller's index axes.
    for (int a = 0; a < 3; ++a) {
        const int s = mapping.source_axis[a];
        report.focus_index[s] =
            mapping.flip[a] ? label_map.geometry().size[s] - 1 - focus[a] : focus[a];
    }

    const Window window = chooseWindow(img);
    const View views[3] = {{0, 1, 2, false}, {0, 2, 1, true}, {1, 2, 0, true}};
    double extent_max = 0;
    for (int a = 0; a < 3; ++a) extent_max = std::max(extent_max, g.size[a] * g.spacing[a]);
    const double mm_per_pixel = extent_max / std::max(16, options.panel_pixels);
    std::array<int, 3> widths{}, heights{};
    for (int v = 0; v < 3; ++v) {
        widths[v] =
            std::max(1, static_cast<int>(std::lround(g.size[views[v].u_axis] *
                                                     g.spacing[views[v].u_axis] / mm_per_pixel)));
        heights[v] =
            std::max(1, static_cast<int>(std::lround(g.size[views[v].v_axis] *
                                                     g.spacing[views[v].v_axis] / mm_per_pixel)));
    }
    constexpr int kGap = 4;
    report.width = widths[0] + widths[1] + widths[2] + 2 * kGap;
    report.height = *std::max_element(heights.begin(), heights.end());

    auto picture = RgbImage::New();
    RgbImage::RegionType region;
    region.SetSize(0, static_cast<itk::SizeValueType>(report.width));
    region.SetSize(1, static_cast<itk::SizeValueType>(report.height));
    picture->SetRegions(region);
    picture->Allocate();
    picture->FillBuffer(Rgb(static_cast<uint8_t>(0)));
    Rgb* px = picture->GetBufferPointer();
    const std::array<int64_t, 3> stride{1, g.size[0], g.size[0] * g.size[1]};

    int x0 = 0;
    for (int v = 0; v < 3; ++v) {
        const View& view = views[v];
        for (int y = 0; y < heights[v]; ++y) {
            int64_t vi = static_cast<int64_t>((y + 0.5) * g.size[view.v_axis] / heights[v]);
            vi = std::clamp<int64_t>(vi, 0, g.size[view.v_axis] - 1);
            if (view.v_flip) vi = g.size[view.v_axis] - 1 - vi;
            for (int x = 0; x < widths[v]; ++x) {
                int64_t ui = static_cast<int64_t>((x + 0.5) * g.size[view.u_axis] / widths[v]);
                ui = std::clamp<int64_t>(ui, 0, g.size[view.u_axis] - 1);
                const int64_t idx = ui * stride[view.u_axis] + vi * stride[view.v_axis] +
                                    focus[view.fixed_axis] * stride[view.fixed_axis];
                const double grey =
                    std::clamp((grey_at(idx) - window.lo) / (window.hi - window.lo), 0.0, 1.0) *
                    255.0;
                std::array<double, 3> rgb{grey, grey, grey};
                if (const int l = label_at(idx)) {
                    const auto c = labelColor(labels, l);
                    for (int ch = 0; ch < 3; ++ch)
                        rgb[ch] = (1 - options.opacity) * rgb[ch] + options.opacity * c[ch];
                }
                Rgb& p = px[static_cast<size_t>(y) * report.width + x0 + x];
                for (int ch = 0; ch < 3; ++ch) p[ch] = static_cast<uint8_t>(std::lround(rgb[ch]));
            }
        }
        x0 += widths[v] + kGap;
    }

    try {
        auto writer = itk::ImageFileWriter<RgbImage>::New();
        writer->SetImageIO(itk::PNGImageIO::New());
        writer->SetInput(picture);
        writer->SetFileName(out.tempPath());
        writer->Update();
    } catch (const std::exception& ex) {
        return ioError(std::string("writing preview PNG failed: ") + ex.what(), path);
    }
    VOXSEG_RETURN_IF_ERROR(out.commit());
    return report;
}

}  // namespace voxseg::pipeline
