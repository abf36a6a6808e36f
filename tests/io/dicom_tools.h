// Test helpers for checking voxseg's DICOM outputs with independent tools: running a command
// (dciodvfy, plastimatch, python3) with its output captured, and the highdicom cross-check of a
// SEG per source image (tests/io/highdicom_check.py).
#pragma once

#include "io/acquired_labels.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace voxseg::testing {

// stdout and stderr of `command`; `exit_code` (optional) gets its exit status (-1 if killed).
inline std::string runCommand(const std::string& command, int* exit_code = nullptr) {
    std::string out;
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (!pipe) return "cannot run: " + command;
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
    const int rc = ::pclose(pipe);
    if (exit_code) *exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return out;
}

inline bool haveCommand(const std::string& name) {
    int rc = 0;
    runCommand("command -v " + name, &rc);
    return rc == 0;
}

// Runs highdicom on `seg` against uint8 label planes on the acquired images of the series in
// `source_dir`: expects the same labels voxel for voxel. Prints highdicom's figures; returns
// false (after printing why) when highdicom is not installed, so the caller can say so.
inline bool highdicomAgrees(const std::string& seg, const std::string& source_dir,
                            const io::AcquiredLabels& expected, const std::string& scratch) {
#ifndef VOXSEG_PYTHON3
    std::printf("python3 not found at configure time: highdicom cross-check skipped\n");
    return false;
#else
    const std::string raw = scratch + ".raw";
    {
        std::ofstream out(raw, std::ios::binary);
        out.write(reinterpret_cast<const char*>(expected.labels.data<uint8_t>()),
                  static_cast<std::streamsize>(expected.labels.geometry().voxelCount()));
        std::ofstream meta(raw + ".json");
        meta << "{\"dtype\": \"uint8\", \"rows\": " << expected.planes.rows
             << ", \"columns\": " << expected.planes.columns << ", \"planes\": [";
        for (size_t k = 0; k < expected.planes.planeCount(); ++k) {
            DcmFileFormat f;
            EXPECT_TRUE(
                f.loadFile(expected.planes.slices[k].path.c_str(), EXS_Unknown, EGL_noChange, 4096)
                    .good());
            OFString sop;
            f.getDataset()->findAndGetOFString(DCM_SOPInstanceUID, sop);
            meta << (k ? ", " : "") << "{\"sop_instance_uid\": \"" << sop.c_str()
                 << "\", \"frame\": 0}";
        }
        meta << "]}\n";
    }
    int rc = 0;
    const std::string verdict = runCommand(std::string(VOXSEG_PYTHON3) + " " + VOXSEG_SOURCE_DIR +
                                               "/tests/io/highdicom_check.py '" + seg + "' '" +
                                               source_dir + "' '" + raw + "'",
                                           &rc);
    std::printf("highdicom on %s: %s", seg.c_str(), verdict.c_str());
    if (rc == 3) {
        std::printf("highdicom is not installed (pip install highdicom): cross-check skipped\n");
        return false;
    }
    EXPECT_EQ(rc, 0) << verdict;
    EXPECT_NE(verdict.find("\"voxels_differing\": 0"), std::string::npos) << verdict;
    return true;
#endif
}

}  // namespace voxseg::testing
