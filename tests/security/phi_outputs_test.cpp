// No patient identifiers where they do not belong (issue 19 part 4). Copies of a real CT and a
// real MR series of ../shared/data get known names, IDs, birth date, other IDs, institution,
// referring physician and accession number (DCMTK's dcmodify); then every command runs on them:
// `info` (text and JSON, JSON logs), `convert` (.nii.gz, .nrrd), `segment` (nifti, stats,
// preview, seg, rtstruct; text and JSON logs, verbose), `batch` (two cases and a failing one),
// `edit` (a one-op journal, SEG and label map out, report) and the viewer's offscreen screenshot.
// Every log, JSON, CSV, metrics file, PNG (text chunks inflated), image (.nii.gz inflated, so the
// NIfTI header's descrip/aux_file are read) and every file name must hold none of the values.
// DICOM outputs (SEG, RTSTRUCT) may carry the patient module, as the standard requires: the test
// checks that they do, and that `info --show-phi` prints the name, so the search can fail.
// Issue 35 item 6: the name is also typed into the free text (SeriesDescription,
// StudyDescription, ProtocolName, ImageComments) in other forms ("Leaktest Zzphipatient",
// "ZZPHIPATIENT, LEAKTEST", the family name alone). The rule (core/free_text.h,
// docs/security.md "Free text"): `info` and the candidate list show the description with the
// name replaced by [PHI], `info --show-phi` as it is; logs, run.json, statistics and batch files
// never carry it. `voxseg serve` is checked by tests/node/orthanc_roundtrip_test.sh (node log,
// audit log).
#include "tests/app/run_voxseg.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace voxseg::security {
namespace {
namespace fs = std::filesystem;
using app::clitest::quote;
using app::clitest::RunResult;
using app::clitest::runShell;
using app::clitest::runVoxseg;
using voxseg::testing::sharedData;
using voxseg::testing::TempDir;

const char* const kCt = "dcm_qa_ct/GE_HiSpeedDual_tilt_varspacing";
const char* const kMr = "dcm_qa_ge/14_Ax_fMRI_HB3_48sl_int_asc";

struct Identifier {
    const char* tag;
    const char* value;
};
// Values no real series holds, each searched for whole and in its parts.
const Identifier kWritten[] = {
    {"(0010,0010)", "ZZPHIPATIENT^LEAKTEST"},
    {"(0010,0020)", "PHIID77031"},
    {"(0010,0030)", "19170923"},
    {"(0010,1000)", "PHIOTHER55102"},
    {"(0008,0080)", "ZZPHI MEMORIAL HOSPITAL"},
    {"(0008,0090)", "ZZREFDOC^PHIDOC"},
    {"(0008,0050)", "PHIACC4412"},
    {"(0008,1030)", "ZZPHIPATIENT LEAKTEST follow-up"},  // StudyDescription
    {"(0018,1030)", "Zzphipatient, Leaktest protocol"},  // ProtocolName
    {"(0020,4000)", "for leaktest zzphipatient"},        // ImageComments
};
// SeriesDescription (0008,103E), the free text voxseg shows: the name in another order and case,
// or the family name alone.
const char* const kCtDescription = "Leaktest Zzphipatient abdomen";
const char* const kMrDescription = "fmri zzphipatient";
const char* const kNeedles[] = {"ZZPHIPATIENT", "LEAKTEST",      "PHIID77031",     "19170923",
                                "1917-09-23",   "PHIOTHER55102", "ZZPHI MEMORIAL", "ZZREFDOC",
                                "PHIDOC",       "PHIACC4412"};

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
    return s;
}

// The needles found in `text` (case-insensitive).
std::vector<std::string> hits(const std::string& text) {
    const std::string u = upper(text);
    std::vector<std::string> found;
    for (const char* n : kNeedles)
        if (u.find(n) != std::string::npos) found.push_back(n);
    return found;
}

std::string readAll(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Inflates a zlib stream (PNG zTXt/iTXt) or a gzip file's bytes (`gzip` true); empty on error.
std::string inflateAll(const std::string& in, bool gzip) {
    z_stream z{};
    if (inflateInit2(&z, gzip ? 15 + 32 : 15) != Z_OK) return {};
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    std::string out;
    char buf[1 << 16];
    int rc = Z_OK;
    while (rc == Z_OK) {
        z.next_out = reinterpret_cast<Bytef*>(buf);
        z.avail_out = sizeof buf;
        rc = inflate(&z, Z_NO_FLUSH);
        out.append(buf, sizeof buf - z.avail_out);
        if (rc == Z_STREAM_END && z.avail_in > 0) rc = inflateReset(&z);  // gzip members
    }
    inflateEnd(&z);
    return out;
}

uint32_t be32(const std::string& s, size_t i) {
    return uint32_t(uint8_t(s[i])) << 24 | uint32_t(uint8_t(s[i + 1])) << 16 |
           uint32_t(uint8_t(s[i + 2])) << 8 | uint32_t(uint8_t(s[i + 3]));
}

// A PNG's text chunks: tEXt as is, zTXt and compressed iTXt inflated.
std::string pngText(const std::string& png, int* chunks) {
    std::string text;
    for (size_t i = 8; i + 12 <= png.size();) {
        const uint32_t n = be32(png, i);
        const std::string type = png.substr(i + 4, 4);
        const std::string data = png.substr(i + 8, std::min<size_t>(n, png.size() - i - 8));
        i += 12 + size_t(n);
        const size_t key_end = data.find('\0');
        if (type == "tEXt") {
            text += data + "\n";
        } else if (type == "zTXt" && key_end != std::string::npos) {
            text += data.substr(0, key_end) + " " + inflateAll(data.substr(key_end + 2), false);
        } else if (type == "iTXt" && key_end != std::string::npos && key_end + 2 < data.size()) {
            const bool compressed = data[key_end + 1] != 0;
            // keyword \0 flag method language \0 translated keyword \0 text
            size_t p = data.find('\0', key_end + 3);
            p = p == std::string::npos ? p : data.find('\0', p + 1);
            if (p == std::string::npos) continue;
            const std::string body = data.substr(p + 1);
            text += data.substr(0, p) + " " + (compressed ? inflateAll(body, false) : body);
        } else {
            continue;
        }
        ++*chunks;
    }
    return text;
}

bool isDicomOutput(const fs::path& p) { return p.extension() == ".dcm"; }

struct Scan {
    int files = 0, png_text_chunks = 0, dicom_outputs = 0, dicom_with_patient = 0;
    std::vector<std::string> leaks;  // "<file>: <needle>"
};

// Searches every file under `root` (names and contents) except DICOM outputs' contents.
void scanTree(const fs::path& root, Scan& scan) {
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        const std::string rel = fs::relative(e.path(), root).string();
        for (const auto& h : hits(rel)) scan.leaks.push_back("file name " + rel + ": " + h);
        if (!e.is_regular_file()) continue;
        ++scan.files;
        const std::string bytes = readAll(e.path());
        if (isDicomOutput(e.path())) {
            ++scan.dicom_outputs;
            scan.dicom_with_patient += !hits(bytes).empty();
            continue;
        }
        std::string text = bytes;
        const std::string name = e.path().filename().string();
        if (name.size() > 3 && name.substr(name.size() - 3) == ".gz")
            text = inflateAll(bytes, true);
        else if (e.path().extension() == ".png")
            text += pngText(bytes, &scan.png_text_chunks);
        for (const auto& h : hits(text)) scan.leaks.push_back(rel + ": " + h);
    }
}

class PhiOutputs : public ::testing::Test {
  protected:
    TempDir dir;
    fs::path logs, out;
    int step = 0;

    void SetUp() override {
        logs = dir.path() / "logs";
        out = dir.path() / "out";
        fs::create_directories(logs);
        fs::create_directories(out);
    }

    // Copies a series and writes the known identifiers and `description` into every file.
    std::string copyWithIdentifiers(const std::string& rel, const std::string& name,
                                    const std::string& description) {
        const fs::path to = dir.path() / "in" / name;
        fs::create_directories(to);
        for (const auto& e : fs::directory_iterator(sharedData(rel)))
            if (e.is_regular_file() && e.path().filename().string()[0] != '.')
                fs::copy_file(e.path(), to / e.path().filename());
        std::string cmd = "dcmodify -nb -imt";
        for (const auto& w : kWritten) cmd += " -i " + quote(std::string(w.tag) + "=" + w.value);
        cmd += " -i " + quote("(0008,103E)=" + description);
        cmd += " " + quote(to.string()) + "/*";
        const RunResult r = runShell(cmd, dir);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return to.string();
    }

    // Runs voxseg (or another command line) and keeps its stdout/stderr as log files.
    RunResult run(const std::vector<std::string>& args, int expect_exit = 0) {
        const RunResult r = runVoxseg(args, dir);
        // Named after the command; an argument that is a path would make no file name (so
        // `info <path>` and `convert <path>` output went unsearched until issue 35).
        std::string what = args.front() + (args.size() > 1 ? "-" + args[1] : "");
        std::replace(what.begin(), what.end(), '/', '_');
        keep(r, what);
        EXPECT_EQ(r.exit_code, expect_exit) << args.front() << " " << args[1] << "\n" << r.err;
        return r;
    }
    void keep(const RunResult& r, const std::string& what) {
        const std::string stem = std::to_string(step++) + "-" + what;
        std::ofstream(logs / (stem + ".stdout")) << r.out;
        std::ofstream(logs / (stem + ".stderr")) << r.err;
    }
};

TEST_F(PhiOutputs, NoIdentifiersOutsideDicomOutputs) {
    VOXSEG_REQUIRE_DATA(kCt);
    VOXSEG_REQUIRE_DATA(kMr);
    if (runShell("command -v dcmodify", dir).exit_code != 0)
        GTEST_SKIP() << "dcmodify (DCMTK, scripts/deps.sh) not installed";
    const std::string ct = copyWithIdentifiers(kCt, "ct", kCtDescription);
    const std::string mr = copyWithIdentifiers(kMr, "mr", kMrDescription);
    const std::string models = std::string(VOXSEG_SOURCE_DIR) + "/sample_data/models/";
    const std::string o = out.string() + "/";

    // The identifiers are there to be found: --show-phi prints them (stdout is not kept).
    const RunResult shown = runVoxseg({"info", "--show-phi", ct}, dir);
    ASSERT_EQ(shown.exit_code, 0) << shown.err;
    ASSERT_FALSE(hits(shown.out).empty()) << "dcmodify did not write the identifiers:\n"
                                          << shown.out;
    EXPECT_NE(shown.out.find(std::string("description: ") + kCtDescription), std::string::npos)
        << "info --show-phi prints the description as it is:\n"
        << shown.out;

    // Without --show-phi the description is shown with the name, in any form, replaced.
    const RunResult table = run({"info", ct, mr});
    EXPECT_NE(table.out.find("description: [PHI] abdomen"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("description: fmri [PHI]"), std::string::npos) << table.out;
    const RunResult listed = run({"--log-format", "json", "-v", "info", "--json", ct, mr});
    EXPECT_NE(listed.out.find("\"description\": \"[PHI] abdomen\""), std::string::npos)
        << listed.out;
    // The candidate list of an ambiguous input (stderr) shows them the same way.
    const RunResult candidates = run({"convert", mr, "-o", o + "never.nii.gz"}, 4);
    EXPECT_NE(candidates.err.find("description: fmri [PHI]"), std::string::npos) << candidates.err;
    run({"-v", "convert", ct, "-o", o + "ct.nii.gz"});
    run({"--log-format", "json", "convert", mr, "--series", "0", "-o", o + "mr.nrrd"});
    const std::string all = "nifti,stats,preview,seg,rtstruct";
    run({"-v", "segment", ct, "-m", models + "ct-phantom", "-o", o + "seg-ct", "--outputs", all});
    run({"--log-format", "json", "-v", "segment", mr, "--series", "0", "-m",
         models + "brain-extraction", "-o", o + "seg-mr", "--outputs", all});

    // Two cases and one that fails (the MR is ambiguous and not CT): errors land in the journal.
    std::ofstream(dir / "cases.csv")
        << "case_id,input\nctcase," << ct << "\nctagain," << ct << "\nmrcase," << mr << "\n";
    run({"--log-format", "json", "batch", dir / "cases.csv", "-m", models + "ct-phantom", "-o",
         o + "batch", "--outputs", all},
        7);

    std::ofstream(dir / "ops.jsonl") << R"({"op":"paint","shape":"sphere","center_mm":[0,0,0],)"
                                     << R"("radius_mm":6,"label":2,"overwrite":"all"})"
                                     << "\n";
    run({"edit", ct, "--labels", o + "seg-ct/segmentation.nii.gz", "--ops", dir / "ops.jsonl", "-o",
         o + "edited.dcm", "--report", o + "edit-report.json"});
    run({"--log-format", "json", "-v", "edit", ct, "--labels", o + "seg-ct/segmentation.dcm",
         "--ops", dir / "ops.jsonl", "-o", o + "edited.nii.gz"});

    if (*VOXSEG_VIEWER_BIN != '\0' && fs::exists(VOXSEG_VIEWER_BIN)) {
        const RunResult v =
            runShell("QT_QPA_PLATFORM=offscreen " + quote(VOXSEG_VIEWER_BIN) + " " + quote(ct) +
                         " --segmentation " + quote(o + "seg-ct/segmentation.dcm") +
                         " --screenshot " + quote(o + "viewer.png"),
                     dir);
        keep(v, "viewer");
        EXPECT_EQ(v.exit_code, 0) << v.err;
        EXPECT_TRUE(fs::exists(o + "viewer.png"));
    }

    Scan scan;
    scanTree(out, scan);
    scanTree(logs, scan);
    std::string leaks;
    for (const auto& l : scan.leaks) leaks += "  " + l + "\n";
    EXPECT_TRUE(scan.leaks.empty()) << scan.leaks.size() << " identifier(s) found:\n" << leaks;
    // What was searched: outputs of every kind, and DICOM outputs that carry the patient module.
    for (const char* f : {"seg-ct/statistics.csv", "seg-ct/statistics.json", "seg-ct/run.json",
                          "seg-ct/preview.png", "seg-mr/segmentation.nii.gz", "mr.nrrd",
                          "batch/ctagain/preview.png", "edit-report.json", "edited.nii.gz"})
        EXPECT_TRUE(fs::exists(out / f)) << f;
    bool metrics = false, journal = false;
    for (const auto& e : fs::directory_iterator(out / "batch" / ".voxseg-batch")) {
        metrics |= e.path().extension() == ".prom";
        journal |= e.path().extension() == ".jsonl";
    }
    EXPECT_TRUE(metrics && journal);
    EXPECT_GE(scan.files, 40);
    EXPECT_GE(scan.dicom_outputs, 7);
    EXPECT_EQ(scan.dicom_with_patient, scan.dicom_outputs)
        << "SEG/RTSTRUCT should carry the source's patient module";
    std::cout << "searched " << scan.files << " files (" << scan.dicom_outputs << " DICOM outputs, "
              << scan.png_text_chunks << " PNG text chunks)\n";
}

// The scan itself can fail: identifiers inside a gzip file, a PNG zTXt chunk and a file name.
TEST(PhiScan, FindsIdentifiersInCompressedTextAndNames) {
    TempDir dir;
    const std::string gz = dir / "a.nii.gz";
    gzFile g = gzopen(gz.c_str(), "wb");
    gzputs(g, "descrip: Zzphipatient");
    gzclose(g);
    std::string text = "Comment";
    text += '\0';
    text += '\0';
    uLongf n = compressBound(16);
    std::string z(n, '\0');
    compress(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>("PHIID77031"),
             10);
    text += z.substr(0, n);
    std::string png = "\x89PNG\r\n\x1a\n";
    for (int s : {24, 16, 8, 0}) png += char((text.size() >> s) & 0xff);
    png += "zTXt" + text + "CRC!";
    std::ofstream(dir / "b.png", std::ios::binary) << png;
    std::ofstream(dir / "19170923.json") << "{}";
    Scan scan;
    scanTree(dir.path(), scan);
    EXPECT_EQ(scan.leaks.size(), 3u);
    EXPECT_EQ(scan.png_text_chunks, 1);
}

}  // namespace
}  // namespace voxseg::security
