// The node's spool on disk: every received instance, every series waiting for or in work, and
// every result until its destinations confirmed it. Folders under spool_dir:
//
//   incoming/<series-key>/   instances of a series still arriving (<SOPInstanceUID>.dcm) and
//                            series.json (routing attributes, written with the first instance)
//   queue/<job>/             a complete series (quiet for quiet_seconds), waiting for its route
//   outbox/<job>/            its results (segmentation.dcm, rtstruct.dcm, ...) and one
//                            sent-<destination> marker per confirmed destination; held = retries
//                            exhausted, waits for `voxseg serve --resend`
//   results/<job>/           files kept after sending (statistics), removed after retention
//   unmatched/<job>/, failed/<job>/   series no route took / whose segmentation failed, with
//                            reason.txt; unmatched ones are removed after the retention period
//   state/journal.jsonl      one fsync'ed line per finished job (batch/journal.h)
//
// Every move between folders is one rename on one file system, so a crash (kill -9, power)
// leaves each series in exactly one place; files are written under a temporary name, fsync'ed
// and renamed (core/atomic_file.h). A series is complete when no instance arrived for
// quiet_seconds and no instance is being written (with group_by study: no instance of any
// series of its study): the in-memory registry counts writes in flight; after a restart the
// newest file time stands in for the last arrival.
//
// Each association that writes into a series folder leaves a marker there
// (incoming/<key>/.receiving-<n>, fsync'ed before the first instance is acknowledged), removed
// when an association carrying the series is released normally. A marker left by an aborted
// association, or found after a kill, means the sender was not told that everything was stored
// and will likely send the series again: such an interrupted series waits
// interrupted_wait_seconds (not quiet_seconds) for the resend, which joins the same folder, so
// that neither a partial series nor a second copy of it is segmented.
//
// Thread-safe: the receiving threads and the scheduler share one Spool.
#pragma once

#include "core/status.h"
#include "node/series_info.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace voxseg::node {

class Spool {
  public:
    // Creates the folders; removes temporaries a killed process left behind.
    static Result<std::unique_ptr<Spool>> open(const std::string& root);
    // The spool of a running node, for its worker process (job_worker.h): nothing created,
    // cleaned up or scanned (the node receives into it meanwhile).
    static std::unique_ptr<Spool> attach(const std::string& root);

    const std::string& root() const { return root_; }
    std::string dir(const std::string& area) const;  // "queue", "outbox", ...
    std::string jobDir(const std::string& area, const std::string& job) const;

    // Where the receiver writes one instance (through an AtomicFile); registers a write in
    // flight for the series (creating its folder and series.json on the first instance, and
    // the marker of `association` when it is not 0 and new to the series).
    // Call endInstance afterwards, whether the write succeeded or not.
    Result<std::string> beginInstance(const SeriesInfo& series, const std::string& sop_uid,
                                      uint64_t association = 0);
    void endInstance(const std::string& series_uid);
    // The association ended: released normally (its series are no longer interrupted, their
    // markers go) or not (they become interrupted). Either way their quiet time starts now.
    // Returns the keys of the series folders it wrote into.
    std::vector<std::string> endAssociation(uint64_t association, bool released);

    // Series quiet for `quiet_seconds` (interrupted ones: the larger of it and
    // `interrupted_wait_seconds`), moved to queue/<job>; their job names (oldest first).
    // GroupBy::kStudy: a series is complete only when every series of its study (same
    // StudyInstanceUID) is quiet and none is being written; then all of them are taken.
    std::vector<std::string> takeCompleteSeries(double quiet_seconds,
                                                GroupBy group_by = GroupBy::kSeries,
                                                double interrupted_wait_seconds = 0.0);
    // Jobs in an area, sorted by name (= arrival order).
    std::vector<std::string> jobs(const std::string& area) const;
    // Moves queue|outbox|... job folders; kIoError when the rename fails.
    Status move(const std::string& from_area, const std::string& job, const std::string& to_area);
    // Removes jobs of `area` older than `hours` (by folder time); returns how many.
    int removeOlderThan(const std::string& area, double hours);
    // Series still arriving (incoming folders).
    size_t incomingCount() const;
    // Keys of the series folders marked interrupted (found with a marker at open, or left by an
    // association that ended without a release), not yet taken.
    std::vector<std::string> interruptedSeries() const;

    // The series record of a job folder (instances counted from the folder).
    static Result<SeriesInfo> readSeries(const std::string& job_dir);

  private:
    explicit Spool(std::string root) : root_(std::move(root)) {}
    struct Arrival {
        std::chrono::steady_clock::time_point last;
        int in_flight = 0;
        std::string study_uid;     // the group of GroupBy::kStudy
        std::set<uint64_t> open;   // associations writing into the folder, markers written
        bool interrupted = false;  // an association ended without release since the last one
                                   // that was released
    };
    std::string root_;
    mutable std::mutex mutex_;
    std::map<std::string, Arrival> arrivals_;  // by series folder key
};

// A series folder name for a SeriesInstanceUID: the UID itself when it is made of digits and
// dots (as UIDs are), else its sha256 (the folder name must be safe whatever a sender sends).
std::string seriesKey(const std::string& series_uid);

}  // namespace voxseg::node
