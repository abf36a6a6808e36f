// One 3-D convolution (C -> C channels, 3x3x3, padding 1, S^3 voxels) in fp32 and in int8
// (engine/cpu/conv_int8.h: u8 x s8 with the requantising epilogue) on oneDNN, timed side by side
// in one run: what int8 buys on this CPU before any graph work (docs/int8.md).
//
//   build/bench/voxseg_bench_int8_conv [--channels 32] [--size 64] [--threads 2] [--runs 5]
#include "engine/cpu/conv_int8.h"
#include "engine/cpu/cpu_backend.h"

#include <omp.h>
#include <dnnl.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using voxseg::engine::quant::Int8ConvSpec;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using Clock = std::chrono::steady_clock;

template <typename F>
double bestSeconds(int runs, F run) {
    run();  // warm-up: first-touch and JIT
    double best = 1e30;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        run();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    int64_t c = 32, s = 64;
    int threads = 2, runs = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const long v = std::strtol(argv[i + 1], nullptr, 10);
        if (a == "--channels")
            c = v;
        else if (a == "--size")
            s = v;
        else if (a == "--threads")
            threads = static_cast<int>(v);
        else if (a == "--runs")
            runs = static_cast<int>(v);
        else {
            std::fprintf(stderr, "unknown option %s (--channels, --size, --threads, --runs)\n",
                         argv[i]);
            return 2;
        }
    }
    omp_set_num_threads(threads);
    const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(eng);
    const dnnl::memory::dims act{1, c, s, s, s}, wdims{c, c, 3, 3, 3};
    const double ops = 2.0 * static_cast<double>(c * c * 27) * static_cast<double>(s * s * s);

    // fp32: oneDNN's own layout choice, as the cpu backend's plans use it.
    const dnnl::convolution_forward::desc fd(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        {act, dt::f32, tag::any}, {wdims, dt::f32, tag::any}, {{c}, dt::f32, tag::a},
        {act, dt::f32, tag::any}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1});
    const dnnl::convolution_forward::primitive_desc fpd(fd, eng);
    dnnl::memory fs(fpd.src_desc(), eng), fw(fpd.weights_desc(), eng), fb(fpd.bias_desc(), eng),
        fdst(fpd.dst_desc(), eng);
    for (dnnl::memory* m : {&fs, &fw, &fb})
        std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
    const dnnl::convolution_forward fconv(fpd);
    const double t32 = bestSeconds(runs, [&] {
        fconv.execute(stream, {{DNNL_ARG_SRC, fs},
                               {DNNL_ARG_WEIGHTS, fw},
                               {DNNL_ARG_BIAS, fb},
                               {DNNL_ARG_DST, fdst}});
        stream.wait();
    });

    // int8: the engine's Int8Conv with a bias, LeakyReLU and zero points (the full epilogue).
    Int8ConvSpec spec;
    spec.in_channels = spec.out_channels = c;
    spec.in_size = {s, s, s};
    spec.kernel = {3, 3, 3};
    spec.pads_begin = spec.pads_end = {1, 1, 1};
    spec.src = {0.02f, 20};
    spec.dst = {0.05f, 30};
    spec.output_scales.assign(c, 0.001f);
    spec.bias.assign(c, 1.0f);
    spec.activation = voxseg::engine::quant::Int8Activation::kLeakyRelu;
    spec.alpha = 0.01f;
    voxseg::engine::quant::Int8Weights w;
    w.values.assign(static_cast<size_t>(c * c * 27), 1);
    w.scales.assign(c, 0.01f);
    auto conv = voxseg::engine::cpu::Int8Conv::create(eng, spec, w);
    if (!conv.isOk()) {
        std::fprintf(stderr, "%s\n", conv.status().message().c_str());
        return 1;
    }
    dnnl::memory is(conv->srcDesc(), eng), idst(conv->dstDesc(), eng);
    std::memset(is.get_data_handle(), 20, is.get_desc().get_size());
    const double t8 = bestSeconds(runs, [&] {
        conv->execute(stream, is, idst);
        stream.wait();
    });

    const auto traits = voxseg::engine::cpuInt8Traits();
    std::printf("conv %lldx%lld ch, 3x3x3, %lld^3, %d threads, best of %d (oneDNN %d.%d.%d)\n",
                static_cast<long long>(c), static_cast<long long>(c), static_cast<long long>(s),
                threads, runs, dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch);
    std::printf("fp32  %-24s %.4f s  %.1f GFLOP/s\n", fpd.impl_info_str(), t32, ops / t32 / 1e9);
    std::printf("int8  %-24s %.4f s  %.1f GOP/s   %.2fx fp32\n", conv->implementation().c_str(), t8,
                ops / t8 / 1e9, t32 / t8);
    std::printf("VNNI/AMX: %s (weights +-%d)\n",
                voxseg::engine::cpuInt8WeightBits(traits) == 8 ? "yes" : "no",
                voxseg::engine::cpuInt8WeightQmax(traits));
    return 0;
}
