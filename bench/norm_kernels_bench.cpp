// voxseg_bench_norm_kernels: the instance-norm passes of the cpu backend
// (engine/cpu/norm_kernels.h) on one nnU-Net-sized tensor, each timed alone: the moments and the
// apply pass for bf16 and for 8-bit inputs (docs/int8-norm-inputs.md), with and without the u8 for
// int8 readers, the float result and a residual.
//
//   voxseg_bench_norm_kernels [--side 96] [--channels 32] [--reps 15]
//
// Channels-last (ndhwc) layout, batch 1, LeakyReLU; OMP_NUM_THREADS sets the threads. Prints the
// best of --reps per pass in ms. Compare builds side by side in one session: the host's speed
// drifts.
#include "engine/cpu/norm_kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace voxseg::engine;
using namespace voxseg::engine::cpu;

namespace {

double seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

int main(int argc, char** argv) {
    int64_t side = 96, channels = 32;
    int reps = 15;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--side")
            side = std::atoll(argv[i + 1]);
        else if (a == "--channels")
            channels = std::atoll(argv[i + 1]);
        else if (a == "--reps")
            reps = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "unknown argument %s (see bench/norm_kernels_bench.cpp)\n",
                         argv[i]);
            return 2;
        }
    }
    LaneLayout L;
    L.batch = 1;
    L.channels = L.lanes = channels;
    L.groups = 1;
    L.spatial = side * side * side;
    L.spatial_stride = channels;
    L.n_stride = L.spatial * channels;
    const size_t n = static_cast<size_t>(L.n_stride);
    std::mt19937 rng(1);
    std::vector<int8_t> xs(n);
    for (int8_t& v : xs) v = static_cast<int8_t>(rng());
    std::vector<uint16_t> xb(n, 0x3f80), yb(n), rb(n, 0x3f00);
    std::vector<uint8_t> q(n);
    std::vector<float> a(channels, 0.5f), b(channels, 0.1f);
    std::vector<double> mean, m2;
    const auto leaky = ActivationKind::kLeakyRelu;
    auto time = [&](const char* what, auto f) {
        double best = 1e9;
        for (int r = 0; r < reps; ++r) {
            const double t = seconds();
            f();
            best = std::min(best, seconds() - t);
        }
        std::printf("%-34s %7.2f ms\n", what, best * 1e3);
    };
    std::printf("%lld^3 x %lld channels, ndhwc, %s kernels\n", static_cast<long long>(side),
                static_cast<long long>(channels), normKernelIsa());
    time("moments bf16", [&] { channelMoments(xb.data(), true, L, mean, m2); });
    time("moments s8", [&] { channelMomentsS8(xs.data(), L, mean, m2); });
    time("apply bf16 -> bf16", [&] {
        affineActivation(xb.data(), yb.data(), nullptr, true, L, a.data(), b.data(), leaky, 0.01f,
                         nullptr);
    });
    time("apply bf16 + residual -> bf16", [&] {
        affineActivation(xb.data(), yb.data(), rb.data(), true, L, a.data(), b.data(), leaky, 0.01f,
                         nullptr);
    });
    time("apply bf16 -> u8", [&] {
        affineActivationU8(xb.data(), nullptr, q.data(), nullptr, true, L, a.data(), b.data(),
                           leaky, 0.01f, nullptr, 10.f, 3.f);
    });
    time("apply bf16 -> u8 + bf16", [&] {
        affineActivationU8(xb.data(), yb.data(), q.data(), nullptr, true, L, a.data(), b.data(),
                           leaky, 0.01f, nullptr, 10.f, 3.f);
    });
    time("apply s8 -> u8", [&] {
        affineActivationU8FromS8(xs.data(), nullptr, q.data(), nullptr, true, L, a.data(), b.data(),
                                 leaky, 0.01f, nullptr, 10.f, 3.f);
    });
    // The same into a halo'd u8 (int8_policy.h, halo sources): one voxel of halo per side.
    const int64_t ps = side + 2;
    std::vector<uint8_t> qh(static_cast<size_t>(ps * ps * ps * channels));
    U8Target halo{qh.data(), 10.f, 3.f, 0};
    halo.size = {side, side, side};
    halo.padded = {ps, ps, ps};
    halo.lo = {1, 1, 1};
    time("apply s8 -> u8 with a halo", [&] {
        affineActivationU8FromS8(xs.data(), nullptr, nullptr, nullptr, true, L, a.data(), b.data(),
                                 leaky, 0.01f, nullptr, 10.f, 3.f, halo);
    });
    time("apply s8 + residual -> u8 + bf16", [&] {
        affineActivationU8FromS8(xs.data(), yb.data(), q.data(), rb.data(), true, L, a.data(),
                                 b.data(), leaky, 0.01f, nullptr, 10.f, 3.f);
    });
    time("apply s8 -> bf16", [&] {
        affineActivationFromS8(xs.data(), yb.data(), nullptr, true, L, a.data(), b.data(), leaky,
                               0.01f, nullptr);
    });
    return 0;
}
