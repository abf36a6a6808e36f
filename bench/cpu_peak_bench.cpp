// The CPU's multiply-add peak, measured: how many GFLOP/s its FMA (fp32) and VDPBF16PS (bf16)
// instructions, and how many int8 GOP/s its VPDPBUSD (VNNI) or, without VNNI, AVX2's
// VPMADDUBSW + VPMADDWD + VPADDD (what oneDNN's int8 kernels use there), and on AMX CPUs the
// tile instructions TDPBF16PS and TDPBUSD, retire per second on N
// threads (one multiply-add = 2 operations in every row), with enough independent accumulators to
// hide their latency and no memory traffic. The networks' rates in docs/perf-cpu.md are quoted as a
// share of this: a target that needs more than the peak cannot be met on that CPU.
//
//   voxseg_bench_cpu_peak [--threads N] [--seconds S]
//
// Prints one line per instruction the CPU has: the rate per thread and for all threads (best
// of 5 timed rounds after a warm-up, each about S / 5 seconds). OMP_WAIT_POLICY=passive as for
// the other CPU benchmarks.
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// Independent accumulators: enough for latency 4-5 cycles x 2 pipes, and with the two operands
// within the register file (32 zmm with AVX-512, 16 ymm with AVX2).
constexpr int kChains = 16;
constexpr int kChainsAvx2 = 12;

// Each kernel runs `iterations` rounds of one multiply-add per accumulator and returns their
// sum (so that the loop is not optimised away); the FLOP per call are iterations * chains *
// flop_per_instruction.
__attribute__((target("avx512f"))) float fmaAvx512(long iterations) {
    __m512 acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
    const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
    for (long it = 0; it < iterations; ++it)
        for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float fmaAvx2(long iterations) {
    __m256 acc[kChainsAvx2];
    for (int i = 0; i < kChainsAvx2; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
    const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
    for (long it = 0; it < iterations; ++it)
        for (int i = 0; i < kChainsAvx2; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    __m256 s = acc[0];
    for (int i = 1; i < kChainsAvx2; ++i) s = _mm256_add_ps(s, acc[i]);
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    float total = 0;
    for (float v : lanes) total += v;
    return total;
}

__attribute__((target("avx512f,avx512bf16"))) float dpbf16Avx512(long iterations) {
    __m512 acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    for (long it = 0; it < iterations; ++it)
        for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
    __m512 s = acc[0];
    for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

// int8 without VNNI: per step and chain VPMADDUBSW (32 u8 x s8 products, pairs summed to s16),
// VPMADDWD by ones (to s32), VPADDD: 32 multiply-adds. The s8 operand is made opaque every
// round (an empty asm), or the compiler would hoist the loop-invariant products out of the loop.
constexpr int kChainsInt8 = 6;
__attribute__((target("avx2"))) float int8Avx2(long iterations) {
    __m256i acc[kChainsInt8], a[kChainsInt8];
    for (int i = 0; i < kChainsInt8; ++i) {
        acc[i] = _mm256_setzero_si256();
        a[i] = _mm256_set1_epi8(static_cast<char>(1 + i));
    }
    __m256i b = _mm256_set1_epi8(3);
    const __m256i ones = _mm256_set1_epi16(1);
    for (long it = 0; it < iterations; ++it) {
        asm volatile("" : "+x"(b));
        for (int i = 0; i < kChainsInt8; ++i) {
            const __m256i pairs = _mm256_maddubs_epi16(a[i], b);
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(pairs, ones));
        }
    }
    __m256i s = acc[0];
    for (int i = 1; i < kChainsInt8; ++i) s = _mm256_add_epi32(s, acc[i]);
    return static_cast<float>(_mm256_extract_epi32(s, 0));
}

// VPDPBUSD: 64 (zmm) or 32 (ymm, AVX-VNNI) u8 x s8 multiply-adds into s32, one instruction.
__attribute__((target("avx512f,avx512vnni"))) float vnniAvx512(long iterations) {
    __m512i acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
    const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(3);
    for (long it = 0; it < iterations; ++it)
        for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __m512i s = acc[0];
    for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, acc[i]);
    return static_cast<float>(_mm512_reduce_add_epi32(s));
}

__attribute__((target("avx2,avxvnni"))) float vnniAvx2(long iterations) {
    __m256i acc[kChainsAvx2];
    for (int i = 0; i < kChainsAvx2; ++i) acc[i] = _mm256_set1_epi32(i);
    const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(3);
    for (long it = 0; it < iterations; ++it)
        for (int i = 0; i < kChainsAvx2; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
    __m256i s = acc[0];
    for (int i = 1; i < kChainsAvx2; ++i) s = _mm256_add_epi32(s, acc[i]);
    return static_cast<float>(_mm256_extract_epi32(s, 0));
}

// AVX-VNNI (CPUID leaf 7 sub-leaf 1, EAX bit 4): not every compiler's __builtin_cpu_supports
// knows the name; the ymm state is the OS's when AVX2 is usable.
bool hasAvxVnni() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__builtin_cpu_supports("avx2") || !__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
        return false;
    return (eax >> 4) & 1u;
}

// AMX (Sapphire Rapids and later): CPUID leaf 7 EDX bits 22 (AMX-BF16), 24 (AMX-TILE) and 25
// (AMX-INT8), and the OS's permission for the tile data (Linux 5.16+: arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, once per process; oneDNN asks the same way).
bool amxUsable(int bit) {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    if (!((edx >> 24) & 1u) || !((edx >> bit) & 1u)) return false;
    static const bool permitted = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    return permitted;
}

// Palette 1 with eight 16-row x 64-byte tiles; per thread.
struct TileConfig {
    uint8_t palette_id = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

__attribute__((target("amx-tile"))) void configureTiles() {
    alignas(64) TileConfig cfg;
    for (int t = 0; t < 8; ++t) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
}

// Four independent accumulator tiles (tmm0-3) from two A tiles (tmm4-5) and two B tiles
// (tmm6-7): TDPBUSD is 16 x 16 x 64 u8 x s8 multiply-adds into s32, TDPBF16PS 16 x 16 x 32 bf16
// pairs into fp32.
constexpr int kTileChains = 4;

// TDPBUSD (int8) or TDPBF16PS (bf16), per the template argument.
template <bool kInt8>
__attribute__((target("amx-tile,amx-int8,amx-bf16"))) float amxTiles(long iterations) {
    configureTiles();
    alignas(64) static thread_local uint8_t operand[16 * 64];
    alignas(64) int32_t out[16 * 16];
    _tile_zero(0);  // the intrinsics are asm statements: one per line
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, operand, 64);
    _tile_loadd(5, operand, 64);
    _tile_loadd(6, operand, 64);
    _tile_loadd(7, operand, 64);
    for (long it = 0; it < iterations; ++it) {
        if constexpr (kInt8) {
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
            _tile_dpbusd(2, 5, 6);
            _tile_dpbusd(3, 5, 7);
        } else {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return static_cast<float>(out[0]);
}

float amxInt8(long iterations) { return amxTiles<true>(iterations); }
float amxBf16(long iterations) { return amxTiles<false>(iterations); }

struct Kernel {
    const char* name;
    const char* what;
    bool available;
    double flop_per_instruction;
    int chains;
    float (*run)(long);
};

// Best GFLOP/s of 5 rounds on `threads` threads (every thread runs the kernel; the round's time
// is the slowest thread's).
double measure(const Kernel& k, int threads, double seconds, double* per_thread) {
    // Calibrate: iterations for about seconds / 5 per round on one thread.
    long iterations = 1 << 16;
    for (;;) {
        const auto t0 = std::chrono::steady_clock::now();
        volatile float sink = k.run(iterations);
        (void)sink;
        const double dt =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (dt > 0.02) {
            iterations = static_cast<long>(iterations * (seconds / 5) / dt) + 1;
            break;
        }
        iterations *= 4;
    }
    const double flop = static_cast<double>(iterations) * k.chains * k.flop_per_instruction;
    double best = 0;
    for (int round = 0; round < 6; ++round) {  // round 0 warms up every thread
        const auto t0 = std::chrono::steady_clock::now();
        float sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
        sum += k.run(iterations);
        const double dt =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        volatile float sink = sum;
        (void)sink;
        if (round > 0) best = std::max(best, flop * threads / dt / 1e9);
    }
    *per_thread = best / threads;
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    int threads = omp_get_max_threads();
    double seconds = 2.0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc) {
            threads = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--seconds" && i + 1 < argc) {
            seconds = std::max(0.05, std::atof(argv[++i]));
        } else {
            std::fprintf(stderr, "usage: %s [--threads N] [--seconds S]\n", argv[0]);
            return a == "--help" || a == "-h" ? 0 : 2;
        }
    }
    __builtin_cpu_init();
    const Kernel kernels[] = {
        {"fp32 avx512", "VFMADD231PS zmm (32 FLOP)", __builtin_cpu_supports("avx512f") != 0, 32,
         kChains, fmaAvx512},
        {"fp32 avx2", "VFMADD231PS ymm (16 FLOP)",
         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), 16, kChainsAvx2, fmaAvx2},
        {"bf16 avx512", "VDPBF16PS zmm (64 FLOP)", __builtin_cpu_supports("avx512bf16") != 0, 64,
         kChains, dpbf16Avx512},
        {"bf16 amx", "TDPBF16PS tile (16384 FLOP)", amxUsable(22), 16384, kTileChains, amxBf16},
        {"int8 amx", "TDPBUSD tile (32768 OP)", amxUsable(25), 32768, kTileChains, amxInt8},
        {"int8 avx512", "VPDPBUSD zmm (128 OP)", __builtin_cpu_supports("avx512vnni") != 0, 128,
         kChains, vnniAvx512},
        {"int8 avxvnni", "VPDPBUSD ymm (64 OP)", hasAvxVnni(), 64, kChainsAvx2, vnniAvx2},
        {"int8 avx2", "VPMADDUBSW+VPMADDWD+VPADDD (64)", __builtin_cpu_supports("avx2") != 0, 64,
         kChainsInt8, int8Avx2},
    };
    std::printf("%-12s %-32s %10s %10s  (%d threads; int8 rows: GOP/s)\n", "peak", "instruction",
                "GFLOP/s", "per thread", threads);
    for (const Kernel& k : kernels) {
        if (!k.available) {
            std::printf("%-12s %-32s %10s\n", k.name, k.what, "-");
            continue;
        }
        double per_thread = 0;
        const double total = measure(k, threads, seconds, &per_thread);
        std::printf("%-12s %-32s %10.1f %10.1f\n", k.name, k.what, total, per_thread);
    }
    return 0;
}
