#include "io/ct_phantom.h"

#include "core/atomic_file.h"
#include "io/dicom_synth.h"
#include "io/image_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

namespace voxseg::io {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kAirHu = -1000.0;
// Stored value = HU - intercept (unsigned, 12 bits stored): the usual CT encoding.
constexpr double kRescaleIntercept = -1024.0;

// Ranges the per-study tissue intensities are drawn from (HU, before noise).
struct HuRange {
    double lo, hi;
};
constexpr HuRange kFat{-110, -90};
constexpr HuRange kMuscle{40, 55};
constexpr HuRange kLung{-870, -830};
constexpr HuRange kLiver{55, 65};
constexpr HuRange kSpleen{44, 52};
constexpr HuRange kKidney{30, 40};
constexpr HuRange kCortexPlain{5, 10};       // cortex above medulla, no contrast
constexpr HuRange kCortexArterial{80, 120};  // cortex above medulla, arterial phase
constexpr HuRange kCancellous{350, 500};
constexpr HuRange kCortical{800, 1100};
constexpr HuRange kBloodPlain{35, 50};
constexpr HuRange kBloodArterial{200, 350};

class Draw {
  public:
    explicit Draw(uint32_t seed) : rng_(seed) {}
    double operator()(double lo, double hi) {
        return std::uniform_real_distribution<double>(lo, hi)(rng_);
    }
    double operator()(HuRange r) { return (*this)(r.lo, r.hi); }
    double sym(double a) { return (*this)(-a, a); }

  private:
    std::mt19937 rng_;
};

uint32_t hash(uint32_t a, uint32_t b) {
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u + (a << 6) + (a >> 2));
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

// Smooth value noise in [-1, 1]: hashed lattice values, trilinear with smoothstep weights.
// Coordinates are in lattice cells.
float valueNoise(double x, double y, double z, uint32_t seed) {
    const double fx = std::floor(x), fy = std::floor(y), fz = std::floor(z);
    const int ix = static_cast<int>(fx), iy = static_cast<int>(fy), iz = static_cast<int>(fz);
    auto s = [](double t) { return t * t * (3 - 2 * t); };
    const double tx = s(x - fx), ty = s(y - fy), tz = s(z - fz);
    auto v = [&](int dx, int dy, int dz) {
        const uint32_t h =
            hash(hash(hash(seed, static_cast<uint32_t>(ix + dx)), static_cast<uint32_t>(iy + dy)),
                 static_cast<uint32_t>(iz + dz));
        return static_cast<double>(h >> 8) * (2.0 / 16777215.0) - 1.0;
    };
    const double x00 = v(0, 0, 0) + tx * (v(1, 0, 0) - v(0, 0, 0));
    const double x10 = v(0, 1, 0) + tx * (v(1, 1, 0) - v(0, 1, 0));
    const double x01 = v(0, 0, 1) + tx * (v(1, 0, 1) - v(0, 0, 1));
    const double x11 = v(0, 1, 1) + tx * (v(1, 1, 1) - v(0, 1, 1));
    const double y0 = x00 + ty * (x10 - x00), y1 = x01 + ty * (x11 - x01);
    return static_cast<float>(y0 + tz * (y1 - y0));
}

double smoothstep(double e0, double e1, double x) {
    const double t = std::clamp((x - e0) / (e1 - e0), 0.0, 1.0);
    return t * t * (3 - 2 * t);
}

// A deformed ellipsoid in the canonical body frame: inside where level(q) < 1. The local frame
// is rotated about z; cubic terms bend and bulge it smoothly.
struct Blob {
    Vec3 centre{0, 0, 0};
    Vec3 semi{1, 1, 1};
    double yaw = 0;  // radians, about z
    std::array<double, 6> bend{};
    Vec3 lo{0, 0, 0}, hi{0, 0, 0};  // conservative bounding box

    void finish() {
        const double r = std::max(semi[0], semi[1]) * 1.35;
        lo = {centre[0] - r, centre[1] - r, centre[2] - semi[2] * 1.35};
        hi = {centre[0] + r, centre[1] + r, centre[2] + semi[2] * 1.35};
    }
    bool mayContain(const Vec3& q) const {
        return q[0] >= lo[0] && q[0] <= hi[0] && q[1] >= lo[1] && q[1] <= hi[1] && q[2] >= lo[2] &&
               q[2] <= hi[2];
    }
    // Local normalised coordinates.
    Vec3 local(const Vec3& q) const {
        const double dx = q[0] - centre[0], dy = q[1] - centre[1];
        const double c = std::cos(yaw), s = std::sin(yaw);
        return {(c * dx + s * dy) / semi[0], (-s * dx + c * dy) / semi[1],
                (q[2] - centre[2]) / semi[2]};
    }
    double level(const Vec3& q) const {
        if (!mayContain(q)) return 10.0;
        const Vec3 u = local(q);
        return u[0] * u[0] + u[1] * u[1] + u[2] * u[2] + bend[0] * u[0] * u[1] +
               bend[1] * u[1] * u[2] + bend[2] * u[0] * u[2] + bend[3] * u[0] * u[2] * u[2] +
               bend[4] * u[1] * u[0] * u[0] + bend[5] * u[2] * u[0] * u[0];
    }
};

Blob makeBlob(Draw& draw, Vec3 centre, Vec3 semi, double yaw_deg, double size_jitter,
              double shift_mm, double bend) {
    Blob b;
    const double s = 1.0 + draw.sym(size_jitter);
    for (int a = 0; a < 3; ++a) {
        b.centre[a] = centre[a] + draw.sym(shift_mm);
        b.semi[a] = semi[a] * s * (1.0 + draw.sym(size_jitter * 0.5));
    }
    b.yaw = (yaw_deg + draw.sym(8.0)) * kPi / 180.0;
    for (auto& c : b.bend) c = draw.sym(bend);
    b.finish();
    return b;
}

// The anatomy, in the canonical frame (mm; x to the patient's left, y posterior, z superior;
// origin at the centre of the scanned range), drawn once per seed.
struct Anatomy {
    PhantomTissues t;
    double cortex_delta = 0;
    // Body outline: semi-axes, angular harmonics, layer thicknesses.
    double body_x = 0, body_y_front = 0, body_y_back = 0, body_taper = 0;
    double h2 = 0, p2 = 0, h3 = 0, p3 = 0;
    double fat_front = 0, fat_back = 0, wall = 0;
    // Diaphragm domes (z of the right and left apex).
    double dome_right = 0, dome_left = 0;
    Blob liver, liver_left_lobe, gallbladder, spleen, kidney_left, kidney_right, heart;
    Blob paraspinal_left, paraspinal_right;
    // Spine.
    double vb_y = 0, vb_rx = 0, vb_ry = 0, canal_r = 0, period = 0, phase = 0, disc = 0;
    // Vessels.
    double aorta_r = 0, ivc_r = 0, ivc_hu = 0, heart_hu = 0;
    double bowel_hu = 0;
    uint32_t noise_seed = 0;

    double diaphragm(double x, double y) const {
        const double right = dome_right - (x + 65) * (x + 65) / 260.0;
        const double left = dome_left - (x - 70) * (x - 70) / 260.0;
        // Posterior recesses reach lower; the anterior attachment is higher.
        return std::max(right, left) - 0.35 * y;
    }
    Vec3 aortaCentre(double z) const {
        const double up = smoothstep(dome_left - 40, dome_left + 40, z);
        return {16.0 + 14.0 * up, vb_y - vb_ry - aorta_r - 2.0 + 30.0 * up, z};
    }
};

Anatomy drawAnatomy(Draw& d, uint32_t seed, ContrastPhase phase) {
    Anatomy a;
    a.t.fat = d(kFat);
    a.t.muscle = d(kMuscle);
    a.t.lung = d(kLung);
    a.t.liver = d(kLiver);
    a.t.spleen = d(kSpleen);
    a.t.kidney_medulla = d(kKidney);
    a.cortex_delta = phase == ContrastPhase::kArterial ? d(kCortexArterial) : d(kCortexPlain);
    a.t.kidney_cortex = a.t.kidney_medulla + a.cortex_delta;
    a.t.bone_cancellous = d(kCancellous);
    a.t.bone_cortical = d(kCortical);
    a.t.aorta = phase == ContrastPhase::kArterial ? d(kBloodArterial) : d(kBloodPlain);
    a.ivc_hu = phase == ContrastPhase::kArterial ? d(70, 110) : d(kBloodPlain);
    a.heart_hu = phase == ContrastPhase::kArterial ? d(120, 200) : d(35, 45);
    a.bowel_hu = d(20, 40);

    a.body_x = d(150, 172);
    a.body_y_front = d(105, 125);
    a.body_y_back = d(98, 110);
    a.body_taper = d(0.0, 0.08);
    a.h2 = d.sym(0.04);
    a.p2 = d(0, 2 * kPi);
    a.h3 = d.sym(0.025);
    a.p3 = d(0, 2 * kPi);
    a.fat_front = d(12, 35);
    a.fat_back = d(8, 20);
    a.wall = d(8, 15);

    a.dome_right = d(50, 65);
    a.dome_left = a.dome_right - d(8, 20);
    const double zr = a.dome_right, zl = a.dome_left;
    a.liver = makeBlob(d, {-65, -5, zr - 65}, {82, 85, 75}, 0, 0.10, 6, 0.25);
    a.liver_left_lobe = makeBlob(d, {5, -45, zr - 40}, {55, 35, 35}, -15, 0.15, 6, 0.2);
    a.gallbladder = makeBlob(d, {-40, -62, zr - 105}, {15, 15, 32}, 0, 0.15, 5, 0.15);
    a.spleen = makeBlob(d, {85, 50, zl - 45}, {30, 55, 50}, 35, 0.15, 6, 0.2);
    a.kidney_left = makeBlob(d, {76, 45, zl - 95}, {30, 32, 55}, 20, 0.10, 6, 0.12);
    a.kidney_right = makeBlob(d, {-76, 48, zr - 125}, {30, 32, 55}, -20, 0.10, 6, 0.12);
    a.heart = makeBlob(d, {18, -30, zl + 50}, {62, 52, 55}, -20, 0.10, 5, 0.15);
    a.paraspinal_left = makeBlob(d, {34, 80, 0}, {22, 20, 1000}, 0, 0.10, 3, 0.0);
    a.paraspinal_right = a.paraspinal_left;
    a.paraspinal_right.centre[0] = -a.paraspinal_left.centre[0];
    a.paraspinal_right.finish();

    a.vb_y = d(32, 40);
    a.vb_rx = d(19, 24);
    a.vb_ry = d(14, 18);
    a.canal_r = d(7, 9);
    a.period = d(26, 31);
    a.phase = d(0, a.period);
    a.disc = d(6, 9);
    a.aorta_r = d(10, 13.5);
    a.ivc_r = d(9, 12);
    a.noise_seed = hash(seed, 0xA5A5u);
    return a;
}

struct Tissue {
    float hu = static_cast<float>(kAirHu);
    uint8_t label = 0;
};

// Spine at canonical point q (z-periodic vertebrae). Returns true when q is in the spine area
// (bone, disc or canal) and fills `out`.
bool spineAt(const Anatomy& a, const Vec3& q, Tissue& out) {
    const double x = q[0], y = q[1];
    if (std::abs(x) > 42 || y < a.vb_y - a.vb_ry - 2 || y > a.vb_y + 60) return false;
    const double zp = std::fmod(q[2] - a.phase + 1000 * a.period, a.period);  // 0..period
    const bool in_disc = zp < a.disc;
    const double endplate = std::min(zp - a.disc, a.period - zp);  // mm to the nearest disc
    const float cancellous = static_cast<float>(a.t.bone_cancellous);
    const float cortical = static_cast<float>(a.t.bone_cortical);
    const uint8_t spine = static_cast<uint8_t>(PhantomLabel::kSpine);
    // Vertebral body.
    const double ex = x / a.vb_rx, ey = (y - a.vb_y) / a.vb_ry;
    const double rho = std::sqrt(ex * ex + ey * ey);
    if (rho < 1.0) {
        if (in_disc) {
            out = {85.0f, 0};
        } else {
            const double depth = (1.0 - rho) * std::min(a.vb_rx, a.vb_ry);
            out = {depth < 2.0 || endplate < 1.5 ? cortical : cancellous, spine};
        }
        return true;
    }
    // Canal and posterior arch.
    const double canal_y = a.vb_y + a.vb_ry + 2.0 + a.canal_r;
    const double dc = std::hypot(x, y - canal_y);
    if (dc < a.canal_r) {
        out = {20.0f, 0};  // cord and CSF
        return true;
    }
    if (in_disc) return false;
    const float arch = 0.5f * (cancellous + cortical);
    if (dc < a.canal_r + 6.0 && y > a.vb_y) {
        out = {arch, spine};
        return true;
    }
    // Spinous process (backwards) and transverse processes (sideways), mid-vertebra only.
    if (std::abs(x) < 4.0 && y > canal_y && y < canal_y + a.canal_r + 24.0) {
        out = {arch, spine};
        return true;
    }
    if (zp > a.disc + 5 && zp < a.period - 5 && std::abs(y - canal_y + 2) < 5.0 &&
        std::abs(x) < a.vb_rx + 18.0) {
        out = {arch, spine};
        return true;
    }
    return false;
}

// Tissue at canonical point q.
Tissue tissueAt(const Anatomy& a, const Vec3& q) {
    Tissue out;
    const double x = q[0], y = q[1], z = q[2];
    // Body outline: an ellipse (flatter at the back) with angular harmonics, tapering with z.
    const double taper = 1.0 + a.body_taper * z / 150.0;
    const double ry = (y < 0 ? a.body_y_front : a.body_y_back) * taper;
    const double rx = a.body_x * taper;
    const double ex = x / rx, ey = y / ry;
    const double r2 = ex * ex + ey * ey;
    if (r2 > 1.4) return out;
    const double r = std::sqrt(r2) + 1e-9;
    const double c = ex / r, s = ey / r;
    const double c2 = c * c - s * s, s2 = 2 * c * s;
    const double c3 = c * (4 * c * c - 3), s3 = s * (3 - 4 * s * s);
    const double harm = 1.0 + a.h2 * (c2 * std::cos(a.p2) - s2 * std::sin(a.p2)) +
                        a.h3 * (c3 * std::cos(a.p3) - s3 * std::sin(a.p3));
    const double rn = r / harm;  // < 1 inside the skin
    if (rn >= 1.0) return out;
    // Depth below the skin along the ray from the centre, in mm.
    const double local_radius = std::hypot(x, y) / rn;
    const double depth = local_radius * (1.0 - rn);
    const double fat_t = y < 0 ? a.fat_front : a.fat_back + (a.fat_front - a.fat_back) * c * c;
    const float fat = static_cast<float>(a.t.fat);
    const float muscle = static_cast<float>(a.t.muscle);
    if (depth < fat_t) return {fat, 0};

    Tissue spine;
    if (spineAt(a, q, spine)) return spine;
    if (a.paraspinal_left.level(q) < 1 || a.paraspinal_right.level(q) < 1) return {muscle, 0};
    if (depth < fat_t + a.wall) return {muscle, 0};

    // Vessels.
    const Vec3 ac = a.aortaCentre(z);
    if (std::hypot(x - ac[0], y - ac[1]) < a.aorta_r)
        return {static_cast<float>(a.t.aorta), static_cast<uint8_t>(PhantomLabel::kAorta)};
    const double dia = a.diaphragm(x, y);
    const double ivc_y = a.vb_y - a.vb_ry - a.ivc_r;
    if (z < dia + 15 && std::hypot((x + 24) / 1.2, y - ivc_y) < a.ivc_r)
        return {static_cast<float>(a.ivc_hu), 0};

    const float n_lo = valueNoise(x / 30.0, y / 30.0, z / 30.0, a.noise_seed);
    if (z > dia) {
        // Thorax: heart and mediastinum, lungs.
        if (a.heart.level(q) < 1) return {static_cast<float>(a.heart_hu), 0};
        const bool mediastinum = std::abs(x - 5) < 22 && y < a.vb_y + 5;
        if (mediastinum || z < dia + 2) return {static_cast<float>(35 + 10 * n_lo), 0};
        const uint8_t lung =
            static_cast<uint8_t>(x > 0 ? PhantomLabel::kLungLeft : PhantomLabel::kLungRight);
        // Vessels: where two independent smooth fields both cross zero, a tube network.
        const double v1 = valueNoise(x / 11.0, y / 11.0, z / 11.0, a.noise_seed + 1);
        const double v2 = valueNoise(x / 11.0, y / 11.0, z / 11.0, a.noise_seed + 2);
        const double w = 0.12 + 0.08 * smoothstep(90, 20, std::abs(x));  // thicker at the hila
        if (std::abs(v1) < w && std::abs(v2) < w) return {30.0f, lung};
        return {static_cast<float>(a.t.lung + 15 * n_lo), lung};
    }
    // Abdomen: organs by priority, then bowel and fat.
    if (a.kidney_left.level(q) < 1 || a.kidney_right.level(q) < 1) {
        const bool left = a.kidney_left.level(q) < 1;
        const Blob& k = left ? a.kidney_left : a.kidney_right;
        const Vec3 u = k.local(q);
        // Hilum: the medial side (towards x = 0) is indented (renal sinus fat).
        const double medial = left ? -u[0] : u[0];
        if (medial > 0.45 && std::abs(u[2]) < 0.35) return {fat, 0};
        const double lv = std::sqrt(k.level(q));
        const bool cortex = lv > 1.0 - 6.0 / k.semi[0];
        const float hu = static_cast<float>(cortex ? a.t.kidney_cortex : a.t.kidney_medulla);
        return {hu, static_cast<uint8_t>(left ? PhantomLabel::kKidneyLeft
                                              : PhantomLabel::kKidneyRight)};
    }
    if (z < dia - 3 && a.spleen.level(q) < 1)
        return {static_cast<float>(a.t.spleen + 3 * n_lo),
                static_cast<uint8_t>(PhantomLabel::kSpleen)};
    if (a.gallbladder.level(q) < 1) return {8.0f, 0};
    if (z < dia - 2 && (a.liver.level(q) < 1 || a.liver_left_lobe.level(q) < 1))
        return {static_cast<float>(a.t.liver + 4 * n_lo),
                static_cast<uint8_t>(PhantomLabel::kLiver)};
    // Bowel loops in fat, with gas pockets.
    const double b = valueNoise(x / 16.0, y / 16.0, z / 16.0, a.noise_seed + 3);
    if (b > 0.62) return {-950.0f, 0};
    const double wt = smoothstep(-0.25, 0.05, b);
    return {static_cast<float>(a.t.fat + wt * (a.bowel_hu - a.t.fat)), 0};
}

// Rotation matrix for yaw (about z), pitch (about x), roll (about y), radians: R = Rz Rx Ry.
Mat3 rotation(double yaw, double pitch, double roll) {
    const double cz = std::cos(yaw), sz = std::sin(yaw);
    const double cx = std::cos(pitch), sx = std::sin(pitch);
    const double cy = std::cos(roll), sy = std::sin(roll);
    const Mat3 rz{cz, -sz, 0, sz, cz, 0, 0, 0, 1};
    const Mat3 rx{1, 0, 0, 0, cx, -sx, 0, sx, cx};
    const Mat3 ry{cy, 0, sy, 0, 1, 0, -sy, 0, cy};
    auto mul = [](const Mat3& p, const Mat3& q) {
        Mat3 m{};
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j)
                for (int k = 0; k < 3; ++k) m[3 * i + j] += p[3 * i + k] * q[3 * k + j];
        return m;
    };
    return mul(rz, mul(rx, ry));
}

// A smooth random displacement (mm) of the canonical frame: a few long-wavelength waves.
struct Warp {
    struct Wave {
        Vec3 k;
        double phase, amp;
        int axis;
    };
    std::vector<Wave> waves;
    Vec3 at(const Vec3& q) const {
        Vec3 d{0, 0, 0};
        for (const auto& w : waves)
            d[w.axis] += w.amp * std::sin(w.k[0] * q[0] + w.k[1] * q[1] + w.k[2] * q[2] + w.phase);
        return d;
    }
};

Warp drawWarp(Draw& d) {
    Warp w;
    for (int axis = 0; axis < 3; ++axis)
        for (int n = 0; n < 2; ++n) {
            Warp::Wave wave;
            for (int a = 0; a < 3; ++a) wave.k[a] = d.sym(2 * kPi / 180.0);
            wave.phase = d(0, 2 * kPi);
            wave.amp = d(0, 5.0);
            wave.axis = axis;
            w.waves.push_back(wave);
        }
    return w;
}

void parallelFor(int64_t n, int threads, const std::function<void(int64_t)>& fn) {
    const int t = std::max(1, std::min<int>(threads, static_cast<int>(n)));
    std::atomic<int64_t> next{0};
    auto worker = [&] {
        for (int64_t i = next++; i < n; i = next++) fn(i);
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < t; ++i) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
}

}  // namespace

const char* phantomLabelName(int label) {
    switch (static_cast<PhantomLabel>(label)) {
        case PhantomLabel::kBackground:
            return "background";
        case PhantomLabel::kLiver:
            return "liver";
        case PhantomLabel::kSpleen:
            return "spleen";
        case PhantomLabel::kKidneyLeft:
            return "kidney_left";
        case PhantomLabel::kKidneyRight:
            return "kidney_right";
        case PhantomLabel::kLungLeft:
            return "lung_left";
        case PhantomLabel::kLungRight:
            return "lung_right";
        case PhantomLabel::kSpine:
            return "spine";
        case PhantomLabel::kAorta:
            return "aorta";
    }
    return "unknown";
}

Result<CtPhantom> makeCtPhantom(const CtPhantomSpec& spec) {
    for (int a = 0; a < 3; ++a) {
        if (spec.size[a] < 1 || spec.size[a] > 4096)
            return invalidArgument("phantom size must be 1..4096 voxels per axis");
        if (!(spec.spacing[a] > 0.0) || spec.spacing[a] > 50.0)
            return invalidArgument("phantom spacing must be in (0, 50] mm");
    }
    Draw d(hash(spec.seed, 0x51u));
    CtPhantom p;
    p.phase = d(0, 1) < 0.5 ? ContrastPhase::kNone : ContrastPhase::kArterial;
    p.noise_hu = spec.noise_hu >= 0 ? spec.noise_hu : d(10, 20);
    p.yaw_deg = d.sym(8);
    p.pitch_deg = d.sym(4);
    p.roll_deg = d.sym(4);
    p.shift_mm = {d.sym(15), d.sym(15), d.sym(20)};
    p.body_scale = d(0.85, 1.08);
    p.length_scale = d(0.9, 1.1);
    const Anatomy anatomy = drawAnatomy(d, spec.seed, p.phase);
    const Warp warp = drawWarp(d);
    const double table_gap = d(5, 15);
    p.tissues = anatomy.t;

    Geometry g;
    g.size = spec.size;
    g.spacing = spec.spacing;
    for (int a = 0; a < 3; ++a) g.origin[a] = -0.5 * spec.spacing[a] * (spec.size[a] - 1);
    p.hu = Volume::allocate<int16_t>(g, {.modality = "CT"});
    p.labels = Volume::allocate<uint8_t>(g);
    int16_t* hu = p.hu.data<int16_t>();
    uint8_t* lab = p.labels.data<uint8_t>();

    // canonical q = S^-1 R^T (x - t)
    const Mat3 rot =
        rotation(p.yaw_deg * kPi / 180, p.pitch_deg * kPi / 180, p.roll_deg * kPi / 180);
    const Mat3 rt{rot[0], rot[3], rot[6], rot[1], rot[4], rot[7], rot[2], rot[5], rot[8]};
    const Vec3 inv_scale{1 / p.body_scale, 1 / p.body_scale, 1 / p.length_scale};
    // The table is fixed to the scanner: a flat top below the patient's back (posterior, +y).
    const double table_y = p.shift_mm[1] + anatomy.body_y_back * p.body_scale + table_gap;

    const int64_t nx = g.size[0], ny = g.size[1], nz = g.size[2];
    const int threads =
        spec.threads > 0 ? spec.threads : static_cast<int>(std::thread::hardware_concurrency());
    // Noise before smoothing: the 3x3 binomial filter scales white-noise sigma by 0.375.
    const double raw_sigma = p.noise_hu / 0.375;
    parallelFor(nz, threads, [&](int64_t k) {
        std::vector<float> ideal(static_cast<size_t>(nx * ny));
        const double z = g.origin[2] + k * g.spacing[2];
        for (int64_t j = 0; j < ny; ++j) {
            const double y = g.origin[1] + j * g.spacing[1];
            for (int64_t i = 0; i < nx; ++i) {
                const double x = g.origin[0] + i * g.spacing[0];
                const Vec3 rel{x - p.shift_mm[0], y - p.shift_mm[1], z - p.shift_mm[2]};
                Vec3 q = multiply(rt, rel);
                for (int a = 0; a < 3; ++a) q[a] *= inv_scale[a];
                Tissue t;
                // Cheap rejection of air far outside the body before warping.
                if (q[0] * q[0] / (1.3 * anatomy.body_x) / (1.3 * anatomy.body_x) +
                        q[1] * q[1] / (1.3 * anatomy.body_y_front) / (1.3 * anatomy.body_y_front) <
                    1.0) {
                    const Vec3 dq = warp.at(q);
                    t = tissueAt(anatomy, {q[0] + dq[0], q[1] + dq[1], q[2] + dq[2]});
                }
                if (spec.table && t.label == 0 && t.hu <= kAirHu + 1 && std::abs(x) < 230) {
                    if (y > table_y && y < table_y + 5)
                        t.hu = 250.0f;  // carbon fibre top
                    else if (y >= table_y + 5 && y < table_y + 45)
                        t.hu = -950.0f;  // foam core
                    else if (y >= table_y + 45 && y < table_y + 52)
                        t.hu = 150.0f;
                }
                ideal[static_cast<size_t>(j * nx + i)] = t.hu;
                lab[(k * ny + j) * nx + i] = t.label;
            }
        }
        // White noise, then a 3x3 binomial in-plane smoothing (scanner PSF, correlated noise).
        std::mt19937 rng(hash(hash(spec.seed, 0xC7u), static_cast<uint32_t>(k)));
        std::normal_distribution<float> noise(0.0f, static_cast<float>(raw_sigma));
        if (raw_sigma > 0)
            for (auto& v : ideal) v += noise(rng);
        std::vector<float> tmp(ideal.size());
        for (int64_t j = 0; j < ny; ++j)
            for (int64_t i = 0; i < nx; ++i) {
                const float* row = &ideal[static_cast<size_t>(j * nx)];
                const int64_t a = std::max<int64_t>(i - 1, 0), b = std::min(i + 1, nx - 1);
                tmp[static_cast<size_t>(j * nx + i)] =
                    0.25f * row[a] + 0.5f * row[i] + 0.25f * row[b];
            }
        for (int64_t j = 0; j < ny; ++j) {
            const int64_t a = std::max<int64_t>(j - 1, 0), b = std::min(j + 1, ny - 1);
            for (int64_t i = 0; i < nx; ++i) {
                const float v = 0.25f * tmp[static_cast<size_t>(a * nx + i)] +
                                0.5f * tmp[static_cast<size_t>(j * nx + i)] +
                                0.25f * tmp[static_cast<size_t>(b * nx + i)];
                hu[(k * ny + j) * nx + i] =
                    static_cast<int16_t>(std::lround(std::clamp(v, -1024.0f, 3071.0f)));
            }
        }
    });
    return p;
}

Result<std::vector<std::string>> writeCtPhantomStudy(const CtPhantom& phantom,
                                                     const CtPhantomSpec& spec,
                                                     const std::string& folder,
                                                     const PhantomWriteOptions& options) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) return ioError("cannot create folder (" + ec.message() + ")", folder);
    std::vector<std::string> written;
    const Geometry g = phantom.hu.geometry();
    if (options.dicom) {
        SynthSeriesSpec s;
        s.study_uid = options.study_uid;
        s.modality = "CT";
        s.description = "voxseg CT phantom seed " + std::to_string(spec.seed);
        s.columns = static_cast<int>(g.size[0]);
        s.rows = static_cast<int>(g.size[1]);
        s.slices = static_cast<int>(g.size[2]);
        s.column_spacing = g.spacing[0];
        s.row_spacing = g.spacing[1];
        s.slice_spacing = g.spacing[2];
        s.origin = g.origin;
        s.is_signed = false;
        s.bits_stored = 12;
        s.intercept = kRescaleIntercept;
        s.ct_image_iod = true;
        s.patient_name = "ANONYMOUS^DEMO";
        s.patient_id = options.patient_id;
        s.name_prefix = "CT";
        s.seed = spec.seed;
        const int16_t* hu = phantom.hu.data<int16_t>();
        const int64_t nx = g.size[0], ny = g.size[1];
        s.value = [=](int i, int j, int k) {
            return static_cast<int32_t>(hu[(k * ny + j) * nx + i] - kRescaleIntercept);
        };
        VOXSEG_ASSIGN_OR_RETURN(auto files,
                                writeSynthSeries(s, (fs::path(folder) / "dicom").string()));
        (void)files;
        written.push_back((fs::path(folder) / "dicom").string());
    }
    if (options.image_nifti) {
        const std::string path = (fs::path(folder) / "image.nii.gz").string();
        VOXSEG_RETURN_IF_ERROR(writeImage(phantom.hu, path));
        written.push_back(path);
    }
    if (options.labels_nifti) {
        const std::string path = (fs::path(folder) / "labels.nii.gz").string();
        VOXSEG_RETURN_IF_ERROR(writeImage(phantom.labels, path));
        written.push_back(path);
    }
    if (options.description) {
        nlohmann::json j;
        j["generator"] = "voxseg phantom";
        j["seed"] = spec.seed;
        j["size"] = g.size;
        j["spacing_mm"] = g.spacing;
        j["contrast_phase"] = phantom.phase == ContrastPhase::kArterial ? "arterial" : "none";
        j["noise_hu"] = phantom.noise_hu;
        j["pose"] = {{"yaw_deg", phantom.yaw_deg},       {"pitch_deg", phantom.pitch_deg},
                     {"roll_deg", phantom.roll_deg},     {"shift_mm", phantom.shift_mm},
                     {"body_scale", phantom.body_scale}, {"length_scale", phantom.length_scale}};
        const PhantomTissues& t = phantom.tissues;
        j["tissues_hu"] = {{"fat", t.fat},
                           {"muscle", t.muscle},
                           {"lung", t.lung},
                           {"liver", t.liver},
                           {"spleen", t.spleen},
                           {"kidney_medulla", t.kidney_medulla},
                           {"kidney_cortex", t.kidney_cortex},
                           {"bone_cancellous", t.bone_cancellous},
                           {"bone_cortical", t.bone_cortical},
                           {"aorta", t.aorta}};
        nlohmann::json labels = nlohmann::json::object();
        for (int l = 1; l <= kPhantomLabelCount; ++l)
            labels[std::to_string(l)] = phantomLabelName(l);
        j["labels"] = labels;
        const std::string path = (fs::path(folder) / "phantom.json").string();
        VOXSEG_RETURN_IF_ERROR(writeFileAtomically(path, j.dump(2) + "\n"));
        written.push_back(path);
    }
    return written;
}

}  // namespace voxseg::io
