#include "io/dicom_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

namespace voxseg::io {

namespace {

using Frames = std::vector<const FrameHeader*>;

struct Group {
    Frames frames;
    std::vector<std::string> reasons;
    std::vector<std::string> warnings;
};

// A frame's value along one split criterion: a sort key and a label for messages.
struct Label {
    double order = 0;
    std::string text;
};

Vec3 unit(const Vec3& v) {
    double n = norm(v);
    return n > 0 ? Vec3{v[0] / n, v[1] / n, v[2] / n} : v;
}

Vec3 sub(const Vec3& a, const Vec3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }

std::string joinLimited(const std::vector<std::string>& items, size_t limit) {
    std::string out;
    for (size_t i = 0; i < items.size() && i < limit; ++i) out += (i ? ", " : "") + items[i];
    if (items.size() > limit) out += fmt::format(", ... ({} in all)", items.size());
    return out;
}

// Splits every group whose frames carry more than one label; each part records why.
std::vector<Group> splitBy(std::vector<Group> groups, const std::string& what,
                           const std::function<std::vector<Label>(const Frames&)>& labels_of) {
    std::vector<Group> out;
    for (Group& g : groups) {
        std::vector<Label> labels = labels_of(g.frames);
        std::map<std::pair<double, std::string>, Frames> parts;
        for (size_t i = 0; i < g.frames.size(); ++i)
            parts[{labels[i].order, labels[i].text}].push_back(g.frames[i]);
        if (parts.size() <= 1) {
            out.push_back(std::move(g));
            continue;
        }
        std::vector<std::string> values;
        for (const auto& [key, frames] : parts) values.push_back(key.second);
        const std::string all = joinLimited(values, 6);
        for (auto& [key, frames] : parts) {
            Group part;
            part.frames = std::move(frames);
            part.reasons = g.reasons;
            part.reasons.push_back(fmt::format(
                "{} varies within the series ({}): this volume has {}", what, all, key.second));
            part.warnings = g.warnings;
            out.push_back(std::move(part));
        }
    }
    return out;
}

// Labels from clustering numeric vectors: frames within `tol` (max abs difference) of a
// cluster's first member share its label.
std::vector<Label> clusterLabels(
    const Frames& frames, const std::function<std::vector<double>(const FrameHeader&)>& vec,
    double tol, bool relative, const std::function<std::string(const std::vector<double>&)>& name) {
    std::vector<std::vector<double>> reps;
    std::vector<Label> labels;
    for (const FrameHeader* f : frames) {
        std::vector<double> v = vec(*f);
        size_t found = reps.size();
        for (size_t r = 0; r < reps.size() && found == reps.size(); ++r) {
            bool same = reps[r].size() == v.size();
            for (size_t i = 0; same && i < v.size(); ++i) {
                double limit =
                    relative ? tol * std::max(std::abs(v[i]), std::abs(reps[r][i])) : tol;
                same = std::abs(v[i] - reps[r][i]) <= limit;
            }
            if (same) found = r;
        }
        if (found == reps.size()) reps.push_back(v);
        labels.push_back({static_cast<double>(found), name(reps[found])});
    }
    return labels;
}

std::string positionKey(const FrameHeader& f) {
    return fmt::format("{:.2f},{:.2f},{:.2f}", f.position[0], f.position[1], f.position[2]);
}

// Largest number of frames sharing one position.
size_t maxRepeat(const Frames& frames) {
    std::map<std::string, size_t> counts;
    size_t m = 0;
    for (const FrameHeader* f : frames) m = std::max(m, ++counts[positionKey(*f)]);
    return m;
}

bool frameOrder(const FrameHeader* a, const FrameHeader* b) {
    if (a->instance_number != b->instance_number) return a->instance_number < b->instance_number;
    if (a->path != b->path) return a->path < b->path;
    if (a->frame != b->frame) return a->frame < b->frame;
    return a->tile < b->tile;
}

// 4D: a group whose positions repeat holds several volumes. Tries the tags that tell time
// points apart; accepts one only if it yields exactly one frame per position per volume.
std::vector<Group> splitTime(std::vector<Group> groups) {
    std::vector<Group> out;
    for (Group& g : groups) {
        const size_t repeat = maxRepeat(g.frames);
        if (repeat <= 1) {
            out.push_back(std::move(g));
            continue;
        }
        struct Criterion {
            const char* what;
            std::function<Label(const FrameHeader&)> label;
        };
        const std::vector<Criterion> criteria = {
            {"temporal position",
             [](const FrameHeader& f) {
                 return Label{static_cast<double>(f.temporal_position),
                              std::to_string(f.temporal_position)};
             }},
            {"trigger time",
             [](const FrameHeader& f) {
                 return Label{std::isfinite(f.trigger_time) ? f.trigger_time : -1.0,
                              fmt::format("{:g} ms", f.trigger_time)};
             }},
            {"acquisition number",
             [](const FrameHeader& f) {
                 return Label{static_cast<double>(f.acquisition_number),
                              std::to_string(f.acquisition_number)};
             }},
        };
        bool done = false;
        for (const Criterion& c : criteria) {
            std::map<std::pair<double, std::string>, Frames> parts;
            for (const FrameHeader* f : g.frames) {
                Label l = c.label(*f);
                parts[{l.order, l.text}].push_back(f);
            }
            if (parts.size() != repeat) continue;
            bool unique = true;
            for (const auto& [key, frames] : parts) unique = unique && maxRepeat(frames) == 1;
            if (!unique) continue;
            size_t t = 0;
            for (auto& [key, frames] : parts) {
                Group part{std::move(frames), g.reasons, g.warnings};
                part.reasons.push_back(
                    fmt::format("4D series (positions repeat {} times): volume {} of {}, {} {}",
                                repeat, ++t, repeat, c.what, key.second));
                out.push_back(std::move(part));
            }
            done = true;
            break;
        }
        if (done) continue;
        // No tag separates the time points: the n-th occurrence of a position (in InstanceNumber
        // order) belongs to volume n, when every position occurs equally often.
        std::map<std::string, size_t> counts;
        for (const FrameHeader* f : g.frames) ++counts[positionKey(*f)];
        bool equal = std::all_of(counts.begin(), counts.end(),
                                 [&](const auto& kv) { return kv.second == repeat; });
        if (!equal) {
            out.push_back(std::move(g));  // duplicates; handled when the stack is checked
            continue;
        }
        Frames sorted = g.frames;
        std::sort(sorted.begin(), sorted.end(), frameOrder);
        std::vector<Frames> volumes(repeat);
        std::map<std::string, size_t> seen;
        for (const FrameHeader* f : sorted) volumes[seen[positionKey(*f)]++].push_back(f);
        for (size_t t = 0; t < repeat; ++t) {
            Group part{std::move(volumes[t]), g.reasons, g.warnings};
            part.reasons.push_back(fmt::format(
                "4D series (positions repeat {} times, no temporal tag tells them apart): volume "
                "{} of {} by InstanceNumber order",
                repeat, t + 1, repeat));
            out.push_back(std::move(part));
        }
    }
    return out;
}

// The part of ImageType that says what kind of image a frame is: ORIGINAL/DERIVED,
// PRIMARY/SECONDARY and the tokens naming a different contrast or component (magnitude, phase,
// field map, localizer...). Other tokens (GE CT's "ADD", Siemens' "NORM", "DIS2D") describe
// processing of the same image and must not split a stack.
std::string imageKind(const std::string& image_type) {
    static const std::set<std::string> kKinds = {"LOCALIZER",
                                                 "M",
                                                 "P",
                                                 "R",
                                                 "I",
                                                 "MAGNITUDE",
                                                 "PHASE",
                                                 "REAL",
                                                 "IMAGINARY",
                                                 "FIELD_MAP",
                                                 "B0",
                                                 "MOSAIC",
                                                 "DIFFUSION",
                                                 "ADC",
                                                 "TRACEW",
                                                 "FA",
                                                 "MIP",
                                                 "MPR",
                                                 "PROJECTION IMAGE",
                                                 "T1",
                                                 "T2",
                                                 "PD"};
    std::vector<std::string> values;
    size_t start = 0;
    while (start <= image_type.size()) {
        size_t end = image_type.find('\\', start);
        if (end == std::string::npos) end = image_type.size();
        values.push_back(image_type.substr(start, end - start));
        start = end + 1;
    }
    std::string kind;
    for (size_t i = 0; i < values.size(); ++i) {
        if (i < 2 || kKinds.count(values[i])) kind += (kind.empty() ? "" : "\\") + values[i];
    }
    return kind;
}

std::string seriesKey(const FrameHeader& f) {
    if (!f.series_uid.empty()) return f.series_uid;
    return fmt::format("(no SeriesInstanceUID)|{}|{}|{}|{}|{}|{}", f.study_uid,
                       f.frame_of_reference_uid, f.series_number, f.modality, f.description,
                       std::filesystem::path(f.path).parent_path().string());
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

SeriesCandidate makeCandidate(Group& g) {
    SeriesCandidate c;
    const FrameHeader& first = *g.frames.front();
    c.series_uid = first.series_uid;
    c.study_uid = first.study_uid;
    c.frame_of_reference_uid = first.frame_of_reference_uid;
    c.modality = first.modality;
    c.description = first.description;
    c.sop_class_uid = first.sop_class_uid;
    c.series_number = first.series_number;
    c.patient = first.patient;
    c.image_type = first.image_type;
    c.echo_time = std::isfinite(first.echo_time) ? first.echo_time : 0;
    c.mosaic_tiles_across = first.mosaic_tiles_across;
    c.warnings = g.warnings;
    for (size_t i = 0; i < g.reasons.size(); ++i) c.split_reason += (i ? "; " : "") + g.reasons[i];

    const bool geometric = std::all_of(g.frames.begin(), g.frames.end(),
                                       [](const FrameHeader* f) { return f->has_geometry; });
    c.has_patient_geometry = geometric;
    const Vec3 r = first.row_dir;
    const Vec3 col = first.col_dir;
    const Vec3 n = geometric ? unit(cross(r, col)) : Vec3{0, 0, 1};
    auto proj = [&](const FrameHeader* f) { return dot(f->position, n); };

    Frames frames = g.frames;
    if (geometric) {
        std::stable_sort(frames.begin(), frames.end(),
                         [&](const FrameHeader* a, const FrameHeader* b) {
                             double pa = proj(a);
                             double pb = proj(b);
                             if (std::abs(pa - pb) > kDuplicateTolerance) return pa < pb;
                             return frameOrder(a, b);
                         });
        // Duplicate positions left after the 4D split: keep the first (by InstanceNumber).
        Frames kept;
        std::vector<std::string> dropped;
        for (const FrameHeader* f : frames) {
            if (!kept.empty() && std::abs(proj(f) - proj(kept.back())) <= kDuplicateTolerance) {
                const FrameHeader* k = kept.back();
                dropped.push_back(
                    f->sop_instance_uid == k->sop_instance_uid && !f->sop_instance_uid.empty()
                        ? fmt::format("{} (same SOPInstanceUID as {})", f->path, k->path)
                        : f->path);
                continue;
            }
            kept.push_back(f);
        }
        if (!dropped.empty())
            c.warnings.push_back(fmt::format(
                "{} slice(s) duplicate the position of another slice and were ignored: {}",
                dropped.size(), joinLimited(dropped, 3)));
        frames = std::move(kept);
    } else {
        std::stable_sort(frames.begin(), frames.end(), frameOrder);
        c.warnings.push_back(
            "no ImagePositionPatient/ImageOrientationPatient: slices stacked in InstanceNumber "
            "order on an identity grid (not patient coordinates)");
    }

    std::set<std::string> paths;
    for (const FrameHeader* f : frames) {
        paths.insert(f->path);
        SliceRef s;
        s.path = f->path;
        s.frame = f->frame;
        s.position = f->position;
        s.instance_number = f->instance_number;
        s.slope = f->slope;
        s.intercept = f->intercept;
        s.philips_scale_slope = std::isfinite(f->philips_scale_slope) ? f->philips_scale_slope : 0;
        s.tile = f->tile;
        c.slices.push_back(std::move(s));
    }
    c.num_files = static_cast<int>(paths.size());

    Geometry& geo = c.geometry;
    geo.size = {first.columns, first.rows, static_cast<int64_t>(frames.size())};
    geo.spacing = {first.column_spacing, first.row_spacing, 1.0};
    const double fallback_step = std::isfinite(first.spacing_between_slices)
                                     ? first.spacing_between_slices
                                 : std::isfinite(first.slice_thickness) ? first.slice_thickness
                                                                        : 1.0;
    if (!geometric) {
        geo.spacing[2] = fallback_step;
        return c;
    }
    geo.origin = frames.front()->position;
    geo.direction = {r[0], col[0], n[0], r[1], col[1], n[1], r[2], col[2], n[2]};
    if (frames.size() < 2) {
        geo.spacing[2] = fallback_step;
        return c;
    }
    std::vector<double> steps;
    for (size_t k = 1; k < frames.size(); ++k)
        steps.push_back(proj(frames[k]) - proj(frames[k - 1]));
    const double med = median(steps);
    const double extent = proj(frames.back()) - proj(frames.front());
    geo.spacing[2] = extent / static_cast<double>(frames.size() - 1);

    std::vector<std::string> gaps;
    double worst_uneven = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
        if (steps[k] > kGapFactor * med) {
            gaps.push_back(fmt::format("{:.4g} mm after slice {} (about {} missing)", steps[k], k,
                                       std::lround(steps[k] / med) - 1));
        } else {
            worst_uneven = std::max(worst_uneven, std::abs(steps[k] - med));
        }
    }
    const std::string uid = c.series_uid.empty() ? first.path : c.series_uid;
    if (!gaps.empty()) {
        c.has_gaps = true;
        c.warnings.push_back(
            fmt::format("series {}: {} gap(s) in the stack (median spacing {:.4g} mm): {}", uid,
                        gaps.size(), med, joinLimited(gaps, 3)));
    }
    if (worst_uneven > kUnevenFraction * med) {
        auto [lo, hi] = std::minmax_element(steps.begin(), steps.end());
        c.uneven_spacing = true;
        c.warnings.push_back(fmt::format(
            "series {}: slice spacing is not uniform ({:.4g} to {:.4g} mm, median {:.4g} mm)", uid,
            *lo, *hi, med));
    }
    if (c.has_gaps || c.uneven_spacing) geo.spacing[2] = med;

    // Gantry tilt: slice origins drift in-plane along the stack.
    double max_drift = 0;
    for (const FrameHeader* f : frames) {
        Vec3 d = sub(f->position, frames.front()->position);
        double along = dot(d, n);
        Vec3 in_plane{d[0] - along * n[0], d[1] - along * n[1], d[2] - along * n[2]};
        max_drift = std::max(max_drift, norm(in_plane));
    }
    if (max_drift > kTiltFractionOfPixel * std::min(first.column_spacing, first.row_spacing)) {
        Vec3 total = sub(frames.back()->position, frames.front()->position);
        double along = dot(total, n);
        c.tilted = true;
        c.tilt_degrees = std::atan2(std::sqrt(std::max(0.0, dot(total, total) - along * along)),
                                    std::abs(along)) *
                         180.0 / M_PI;
        c.warnings.push_back(fmt::format(
            "series {}: gantry tilt of {:.2f} degrees (slice origins drift up to {:.3g} mm "
            "in-plane along the stack)",
            uid, c.tilt_degrees, max_drift));
    }
    return c;
}

}  // namespace

std::vector<SeriesCandidate> buildCandidates(const std::vector<FrameHeader>& all) {
    std::map<std::string, Group> by_series;
    std::vector<std::string> order;
    for (const FrameHeader& f : all) {
        std::string key = seriesKey(f);
        auto [it, inserted] = by_series.try_emplace(key);
        if (inserted) {
            order.push_back(key);
            if (f.series_uid.empty())
                it->second.warnings.push_back(
                    "SeriesInstanceUID is empty: files grouped by folder, study, frame of "
                    "reference, series number and description");
        }
        it->second.frames.push_back(&f);
    }
    std::vector<SeriesCandidate> out;
    for (const std::string& key : order) {
        std::vector<Group> groups{std::move(by_series[key])};
        groups = splitBy(std::move(groups), "matrix size", [](const Frames& fs) {
            std::vector<Label> l;
            for (const FrameHeader* f : fs)
                l.push_back({static_cast<double>(f->columns) * 1e6 + f->rows,
                             fmt::format("{}x{}", f->columns, f->rows)});
            return l;
        });
        groups = splitBy(std::move(groups), "position information", [](const Frames& fs) {
            std::vector<Label> l;
            for (const FrameHeader* f : fs)
                l.push_back({f->has_geometry ? 0.0 : 1.0, f->has_geometry ? "IPP/IOP" : "none"});
            return l;
        });
        groups = splitBy(std::move(groups), "orientation", [](const Frames& fs) {
            return clusterLabels(
                fs,
                [](const FrameHeader& f) {
                    return std::vector<double>{f.row_dir[0], f.row_dir[1], f.row_dir[2],
                                               f.col_dir[0], f.col_dir[1], f.col_dir[2]};
                },
                kOrientationTolerance, false,
                [](const std::vector<double>& v) {
                    return fmt::format("IOP {:.4f}\\{:.4f}\\{:.4f}\\{:.4f}\\{:.4f}\\{:.4f}", v[0],
                                       v[1], v[2], v[3], v[4], v[5]);
                });
        });
        groups = splitBy(std::move(groups), "pixel spacing", [](const Frames& fs) {
            return clusterLabels(
                fs,
                [](const FrameHeader& f) {
                    return std::vector<double>{f.row_spacing, f.column_spacing};
                },
                1e-4, true,
                [](const std::vector<double>& v) {
                    return fmt::format("{:.5g}x{:.5g} mm", v[1], v[0]);
                });
        });
        groups = splitBy(std::move(groups), "image type", [](const Frames& fs) {
            std::vector<Label> l;
            for (const FrameHeader* f : fs) l.push_back({0, imageKind(f->image_type)});
            return l;
        });
        groups = splitBy(std::move(groups), "echo", [](const Frames& fs) {
            std::vector<Label> l;
            for (const FrameHeader* f : fs) {
                if (std::isfinite(f->echo_time))
                    l.push_back({f->echo_time, fmt::format("echo time {:g} ms", f->echo_time)});
                else
                    l.push_back({static_cast<double>(f->echo_number),
                                 fmt::format("echo number {}", f->echo_number)});
            }
            return l;
        });
        groups = splitBy(std::move(groups), "stack", [](const Frames& fs) {
            std::vector<Label> l;
            for (const FrameHeader* f : fs) l.push_back({0, "StackID " + f->stack_id});
            return l;
        });
        groups = splitTime(std::move(groups));
        for (Group& g : groups) out.push_back(makeCandidate(g));
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const SeriesCandidate& a, const SeriesCandidate& b) {
                         if (a.series_number != b.series_number)
                             return a.series_number < b.series_number;
                         return a.series_uid < b.series_uid;
                     });
    for (size_t i = 0; i < out.size(); ++i) out[i].index = static_cast<int>(i);
    return out;
}

}  // namespace voxseg::io
