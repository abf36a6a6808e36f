// Interactive (nnInteractive-compatible) segmentation speed (issue 38 item 7; docs/interactive.md
// "Speed"): scripted sessions on a CT image with a label map, per object (label value) a point at
// the object's deepest voxel, corrective points (edit/interactive/simulated_clicks.h: each at the
// deepest voxel of the largest error, include on a miss, exclude on a false positive) with the
// Dice after each click, then after a reset a 2-D box on the object's middle slice, and after
// another reset a scribble across it. Per prompt: wall time (median, p95, max),
// network calls, and the time split between the network and the rest (session, resampling,
// refinement planning, paste-back); peak memory. --forward-only times the package's network
// alone (no session), for networks too big for a session on a small machine.
//   voxseg_bench_interactive <package> <image> <labels> [--objects 1,2,3] [--corrections 3]
//                            [--threads 2] [--no-autozoom] [--precision fp32|bf16|fp16]
//   voxseg_bench_interactive <package> --forward-only N [--threads 2] [--precision ...]
// --fake-network replaces the network by a threshold of the image channel (> 0 after
// normalisation: the body, not air or lung), which changes the window's border on every object, so
// AutoZoom goes to its maximum and refinement covers a large region: the session's own cost,
// free of network time (for callgrind instruction counts of the session code).
#include "edit/interactive/interactive_model.h"
#include "edit/interactive/interactive_session.h"
#include "edit/interactive/simulated_clicks.h"
#include "io/image_io.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace voxseg;
using namespace voxseg::edit::interactive;
using Clock = std::chrono::steady_clock;

namespace {

double msSince(Clock::time_point a) {
    return std::chrono::duration<double, std::milli>(Clock::now() - a).count();
}

double peakMiB() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;
}

double rssMiB() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
    return 0.0;
}

struct Sample {
    double wall_ms = 0, net_ms = 0;
    int calls = 0, boxes = 0;
    double zoom = 1.0;
};

void report(const std::string& name, std::vector<Sample> s) {
    if (s.empty()) return;
    std::vector<double> wall, net, rest;
    double calls = 0, boxes = 0, zoom = 1.0;
    for (const auto& x : s) {
        wall.push_back(x.wall_ms);
        net.push_back(x.net_ms);
        rest.push_back(x.wall_ms - x.net_ms);
        calls += x.calls;
        boxes += x.boxes;
        zoom = std::max(zoom, x.zoom);
    }
    auto q = [](std::vector<double> v, double p) {
        std::sort(v.begin(), v.end());
        return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(p * v.size())) - 1)];
    };
    std::printf(
        "%-22s n=%3zu  wall median %7.1f p95 %7.1f max %7.1f ms | network median %7.1f ms, rest "
        "median %6.1f p95 %6.1f ms | calls/prompt %.2f, refine boxes %.2f, max zoom %.3g\n",
        name.c_str(), s.size(), q(wall, 0.5), q(wall, 0.95), q(wall, 1.0), q(net, 0.5),
        q(rest, 0.5), q(rest, 0.95), calls / s.size(), boxes / s.size(), zoom);
}

struct Object {
    int label = 0;
    Index3 lo{}, hi{};  // bounding box, hi exclusive
    Index3 seed{};      // the label voxel nearest its centroid (box and scribble)
};

std::vector<Object> findObjects(const std::vector<uint8_t>& labels, Index3 n,
                                const std::vector<int>& wanted) {
    std::vector<Object> out;
    for (int l : wanted) {
        Object o;
        o.label = l;
        o.lo = {n[0], n[1], n[2]};
        double sum[3] = {0, 0, 0}, count = 0;
        for (int64_t z = 0; z < n[0]; ++z)
            for (int64_t y = 0; y < n[1]; ++y)
                for (int64_t x = 0; x < n[2]; ++x) {
                    if (labels[(z * n[1] + y) * n[2] + x] != l) continue;
                    const Index3 p{z, y, x};
                    for (int a = 0; a < 3; ++a) {
                        o.lo[a] = std::min(o.lo[a], p[a]);
                        o.hi[a] = std::max(o.hi[a], p[a] + 1);
                        sum[a] += static_cast<double>(p[a]);
                    }
                    ++count;
                }
        if (count == 0) continue;
        double best = 1e30;
        for (int64_t z = o.lo[0]; z < o.hi[0]; ++z)
            for (int64_t y = o.lo[1]; y < o.hi[1]; ++y)
                for (int64_t x = o.lo[2]; x < o.hi[2]; ++x) {
                    if (labels[(z * n[1] + y) * n[2] + x] != l) continue;
                    const double dz = z - sum[0] / count, dy = y - sum[1] / count,
                                 dx = x - sum[2] / count, d = dz * dz + dy * dy + dx * dx;
                    if (d < best) best = d, o.seed = {z, y, x};
                }
        out.push_back(o);
    }
    return out;
}

int forwardOnly(InteractiveModel& model, int n) {
    const auto& shape = model.inputShape();
    int64_t count = 1;
    for (auto d : shape) count *= d;
    std::vector<float> input(static_cast<size_t>(count));
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : input) v = normal(rng);
    std::vector<uint8_t> argmax;
    auto forward = model.forward();
    std::vector<double> t;
    for (int i = 0; i <= n; ++i) {
        const auto t0 = Clock::now();
        if (Status st = forward(input, argmax); !st.isOk()) {
            std::fprintf(stderr, "%s\n", st.toString().c_str());
            return 1;
        }
        const double ms = msSince(t0);
        if (i == 0)
            std::printf("first forward %.1f ms\n", ms);
        else
            t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    if (!t.empty())
        std::printf("forward n=%zu  median %.1f ms  min %.1f ms  max %.1f ms  peak RSS %.0f MiB\n",
                    t.size(), t[t.size() / 2], t.front(), t.back(), peakMiB());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: see bench/interactive_bench.cpp\n");
        return 2;
    }
    std::vector<std::string> pos;
    std::vector<int> objects{1, 2, 3, 4};
    int corrections = 3, threads = 2, forward_only = -1;
    bool autozoom = true, fake = false;
    std::string precision = "fp32";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--objects") {
            objects.clear();
            const std::string v = next();
            for (size_t p = 0; p < v.size();) {
                objects.push_back(std::atoi(v.c_str() + p));
                p = v.find(',', p);
                p = p == std::string::npos ? v.size() : p + 1;
            }
        } else if (a == "--corrections") {
            corrections = std::atoi(next().c_str());
        } else if (a == "--threads") {
            threads = std::atoi(next().c_str());
        } else if (a == "--no-autozoom") {
            autozoom = false;
        } else if (a == "--precision") {
            precision = next();
        } else if (a == "--fake-network") {
            fake = true;
        } else if (a == "--forward-only") {
            forward_only = std::atoi(next().c_str());
        } else {
            pos.push_back(a);
        }
    }
    InteractiveModelOptions options;
    options.num_threads = threads;
    auto prec = engine::parsePrecision(precision);
    if (!prec.isOk()) {
        std::fprintf(stderr, "%s\n", prec.status().toString().c_str());
        return 2;
    }
    options.precision = *prec;
    auto t0 = Clock::now();
    auto model = InteractiveModel::load(pos[0], options);
    if (!model.isOk()) {
        std::fprintf(stderr, "%s\n", model.status().toString().c_str());
        return 1;
    }
    const auto& shape = (*model)->inputShape();
    std::printf("model %s: input [%lld, %lld, %lld, %lld, %lld], %s, %d threads; load %.0f ms\n",
                pos[0].c_str(), (long long)shape[0], (long long)shape[1], (long long)shape[2],
                (long long)shape[3], (long long)shape[4], (*model)->describe().c_str(), threads,
                msSince(t0));
    if (forward_only >= 0) return forwardOnly(**model, forward_only);
    if (pos.size() < 3) {
        std::fprintf(stderr, "need <package> <image> <labels>\n");
        return 2;
    }

    auto image = io::readImage(pos[1]);
    auto labels_volume = io::readImage(pos[2]);
    if (!image.isOk() || !labels_volume.isOk()) {
        std::fprintf(stderr, "cannot read the image or the labels\n");
        return 1;
    }
    const Volume labels8 = labels_volume->castTo(PixelType::kUInt8);
    const auto size = image->geometry().size;
    const Index3 n{size[2], size[1], size[0]};
    const std::vector<uint8_t> labels(labels8.data<uint8_t>(),
                                      labels8.data<uint8_t>() + n[0] * n[1] * n[2]);

    // Network time and calls, counted around the model's forward.
    double net_ms = 0;
    int calls = 0;
    Forward inner = (*model)->forward();
    if (fake) {
        const int64_t np = shape[2] * shape[3] * shape[4];
        inner = [np](const std::vector<float>& in, std::vector<uint8_t>& out) {
            out.resize(static_cast<size_t>(np));
            for (int64_t i = 0; i < np; ++i) out[i] = in[i] > 0.0f;
            return Status::ok();
        };
    }
    Forward timed = [&](const std::vector<float>& in, std::vector<uint8_t>& out) {
        const auto f0 = Clock::now();
        Status st = inner(in, out);
        net_ms += msSince(f0);
        ++calls;
        return st;
    };
    InteractiveSession session((*model)->spec(), timed);
    session.setAutoZoom(autozoom);
    t0 = Clock::now();
    if (Status st = session.setImage(*image); !st.isOk()) {
        std::fprintf(stderr, "%s\n", st.toString().c_str());
        return 1;
    }
    std::printf("image %lldx%lldx%lld (x y z): setImage %.0f ms, RSS %.0f MiB; autozoom %s%s\n",
                (long long)n[2], (long long)n[1], (long long)n[0], msSince(t0), rssMiB(),
                autozoom ? "on" : "off", fake ? "; fake network (image > 0)" : "");

    std::map<std::string, std::vector<Sample>> samples;
    std::vector<Sample> all;
    auto timedPrompt = [&](const std::string& kind, auto&& call) {
        net_ms = 0;
        calls = 0;
        const auto p0 = Clock::now();
        auto r = call();
        Sample s;
        s.wall_ms = msSince(p0);
        if (!r.isOk()) {
            std::fprintf(stderr, "%s: %s\n", kind.c_str(), r.status().toString().c_str());
            std::exit(1);
        }
        s.net_ms = net_ms;
        s.calls = calls;
        s.boxes = static_cast<int>(session.lastLog().refinement_boxes.size());
        for (const auto& f : session.lastLog().forwards) s.zoom = std::max(s.zoom, f.zoom);
        samples[kind].push_back(s);
        // "all prompts" keeps the session it always timed: point, corrections, box, scribble.
        if (kind != "point after a box") all.push_back(s);
    };
    const auto objs = findObjects(labels, n, objects);
    std::vector<std::vector<double>> dice_per_object, box_dice_per_object;
    for (const auto& o : objs) {
        // Clicks as the simulated user makes them (edit/interactive/simulated_clicks.h): the
        // object's deepest voxel, then the deepest voxel of the largest error.
        std::vector<uint8_t> truth(labels.size());
        for (size_t i = 0; i < labels.size(); ++i) truth[i] = labels[i] == o.label;
        std::vector<double> dice;
        std::optional<SimulatedClick> click = SimulatedClick{*deepestVoxel(truth, n), true};
        for (int c = 0; c <= corrections && click; ++c) {
            const Point3 p{double(click->voxel[0]), double(click->voxel[1]),
                           double(click->voxel[2])};
            timedPrompt(c == 0 ? "point" : "corrective point",
                        [&] { return session.addPoint(p, click->include); });
            dice.push_back(diceScore(session.target(), truth));
            click = correctiveClick(session.target(), truth, n);
        }
        std::printf("object %d (%lld voxels): Dice after click", o.label,
                    (long long)std::count(truth.begin(), truth.end(), uint8_t{1}));
        for (size_t c = 0; c < dice.size(); ++c) std::printf(" %zu: %.3f", c + 1, dice[c]);
        const auto reached =
            std::find_if(dice.begin(), dice.end(), [](double d) { return d >= 0.9; });
        if (reached == dice.end())
            std::printf("; 0.9 not reached\n");
        else
            std::printf("; 0.9 at click %lld\n", (long long)(reached - dice.begin() + 1));
        dice_per_object.push_back(dice);
        // A 2-D box on the seed's slice around the object's extent there.
        Index3 lo{o.seed[0], n[1], n[2]}, hi{o.seed[0] + 1, 0, 0};
        for (int64_t y = 0; y < n[1]; ++y)
            for (int64_t x = 0; x < n[2]; ++x)
                if (labels[(o.seed[0] * n[1] + y) * n[2] + x] == o.label) {
                    lo[1] = std::min(lo[1], y), hi[1] = std::max(hi[1], y + 1);
                    lo[2] = std::min(lo[2], x), hi[2] = std::max(hi[2], x + 1);
                }
        (void)session.resetInteractions();
        BoxRequest box;
        for (int a = 0; a < 3; ++a) box.lo[a] = double(lo[a]), box.hi[a] = double(hi[a]);
        timedPrompt("box (2-D)", [&] { return session.addBox(box, true); });
        // The box, then corrective clicks as above: Dice after the box and after each click.
        std::vector<double> box_dice{diceScore(session.target(), truth)};
        for (int c = 0; c < corrections; ++c) {
            const auto fix = correctiveClick(session.target(), truth, n);
            if (!fix) break;
            const Point3 p{double(fix->voxel[0]), double(fix->voxel[1]), double(fix->voxel[2])};
            timedPrompt("point after a box", [&] { return session.addPoint(p, fix->include); });
            box_dice.push_back(diceScore(session.target(), truth));
        }
        std::printf("object %d: Dice after the box", o.label);
        for (size_t c = 0; c < box_dice.size(); ++c)
            std::printf(c ? ", click %zu: %.3f" : " %.3f", c, box_dice[c]);
        std::printf("\n");
        box_dice_per_object.push_back(box_dice);
        // A scribble along the seed's row, over the middle half of the object's run there.
        (void)session.resetInteractions();
        int64_t x0 = o.seed[2], x1 = o.seed[2];
        const uint8_t* row = labels.data() + (o.seed[0] * n[1] + o.seed[1]) * n[2];
        while (x0 > 0 && row[x0 - 1] == o.label) --x0;
        while (x1 + 1 < n[2] && row[x1 + 1] == o.label) ++x1;
        const double q = (x1 - x0) / 4.0;
        const Point3 seed{double(o.seed[0]), double(o.seed[1]), double(o.seed[2])};
        const std::vector<Point3> line{{seed[0], seed[1], x0 + q},
                                       {seed[0], seed[1] + 2, seed[2]},
                                       {seed[0], seed[1], x1 - q}};
        timedPrompt("scribble", [&] { return session.addScribble(line, true); });
        (void)session.resetInteractions();
    }
    for (const char* k :
         {"point", "corrective point", "box (2-D)", "point after a box", "scribble"})
        report(k, samples[k]);
    report("all prompts", all);
    // An object whose mask was exact early keeps its last Dice.
    const auto mean = [](const std::vector<std::vector<double>>& per_object, size_t c) {
        double sum = 0;
        for (const auto& d : per_object) sum += d.empty() ? 0.0 : d[std::min(c, d.size() - 1)];
        return per_object.empty() ? 0.0 : sum / double(per_object.size());
    };
    std::printf("Dice (mean over %zu objects) after click", dice_per_object.size());
    for (size_t c = 0; c <= static_cast<size_t>(corrections); ++c)
        std::printf(" %zu: %.3f", c + 1, mean(dice_per_object, c));
    std::printf("\nDice (mean) after the box %.3f", mean(box_dice_per_object, 0));
    for (size_t c = 1; c <= static_cast<size_t>(corrections); ++c)
        std::printf(", then click %zu: %.3f", c, mean(box_dice_per_object, c));
    std::printf("\n");
    std::printf("peak RSS %.0f MiB\n", peakMiB());
    return 0;
}
