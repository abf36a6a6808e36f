#include "node/receiver.h"

#include "core/free_text.h"
#include "core/log.h"
#include "io/dicom_net_scp.h"

#include <filesystem>

namespace voxseg::node {
namespace fs = std::filesystem;
namespace {

constexpr const char* kComponent = "node";
using io::DicomAssociation;
using io::DicomAssociationDecision;
using io::DicomIncomingInstance;
using io::DicomStoreStatus;

// The node's policy for the storage SCP: allowed callers, the disk guard, the spool (fsync'ed
// and renamed, encrypted when a key is set) before success, the audit trail and the metrics.
class NodeStorage : public io::DicomStorageHandler {
  public:
    explicit NodeStorage(const ReceiverContext& ctx) : ctx_(ctx) {}

    DicomAssociationDecision onAssociation(const DicomAssociation& a) override {
        if (!a.not_dicom.empty()) {
            // A port scan, a load balancer's health check, HTTP: no AE title to blame.
            const std::string peer = a.peer.empty() ? "unknown" : a.peer;
            log::warning(kComponent, "connection from {} refused: {}", peer, a.not_dicom);
            ctx_.audit->record("connection_refused", {{"peer", peer}, {"reason", a.not_dicom}});
            return DicomAssociationDecision::kRefuseCallerUnknown;
        }
        if (!ctx_.config->accept_any_called_ae && a.called_ae != ctx_.config->ae_title) {
            ++ctx_.metrics->associations_rejected_caller;
            const std::string why = "called AE title not recognized (" + a.called_ae +
                                    "; this node is " + ctx_.config->ae_title + ")";
            log::warning(kComponent, "association from {} ({}) refused: {}", a.calling_ae, a.peer,
                         why);
            ctx_.audit->record("association_refused", {{"calling_ae", a.calling_ae},
                                                       {"called_ae", a.called_ae},
                                                       {"peer", a.peer},
                                                       {"reason", why}});
            return DicomAssociationDecision::kRefuseCalledUnknown;
        }
        if (!callerAllowed(a)) {
            ++ctx_.metrics->associations_rejected_caller;
            log::warning(kComponent, "association from {} ({}) refused: not in allowed_callers",
                         a.calling_ae, a.peer);
            ctx_.audit->record(
                "association_refused",
                {{"calling_ae", a.calling_ae}, {"peer", a.peer}, {"reason", "caller not allowed"}});
            return DicomAssociationDecision::kRefuseCallerUnknown;
        }
        if (diskGuardActive(ctx_)) {
            ++ctx_.metrics->associations_rejected_disk;
            log::error(kComponent,
                       "association from {} ({}) refused: out of resources (spool free space "
                       "below min_free_mb)",
                       a.calling_ae, a.peer);
            ctx_.audit->record("association_refused", {{"calling_ae", a.calling_ae},
                                                       {"peer", a.peer},
                                                       {"reason", "out of resources: disk"}});
            return DicomAssociationDecision::kRefuseOutOfResources;
        }
        ++ctx_.metrics->associations;
        ctx_.audit->record(
            "association",
            {{"calling_ae", a.calling_ae}, {"called_ae", a.called_ae}, {"peer", a.peer}});
        return DicomAssociationDecision::kAccept;
    }

    DicomStoreStatus onStore(const DicomAssociation& a, const DicomIncomingInstance& in) override {
        const std::string& sop_uid = in.request_sop_instance_uid;
        if (!in.storage_class_accepted)
            return refuse(a, DicomStoreStatus::kSopClassNotSupported,
                          "SOP class " + in.request_sop_class_uid + " not accepted", sop_uid);
        // Whatever a later message quotes (a description, a file name), the log and the audit
        // trail replace this patient's identifiers with [PHI].
        for (const std::string* v : {&in.patient_name, &in.patient_id, &in.patient_birth_date})
            if (v->size() >= 3) log::registerIdentifier(*v);
        // The receipt and the SCP's checks (nesting, limits, pixel data): refused now, while
        // the sender can still resend or report it, not after the series failed.
        if (!in.check.isOk()) return refuse(a, in.check_status, in.check.message(), sop_uid);
        SeriesInfo s;
        s.sop_class_uid = in.sop_class_uid;
        s.study_uid = in.study_uid;
        s.series_uid = in.series_uid;
        s.modality = in.modality;
        s.body_part = in.body_part;
        // series.json is not encrypted with the spool: the description goes there for routing
        // with the patient's name scrubbed (core/free_text.h).
        s.series_description = log::scrubFreeText(in.series_description);
        s.calling_ae = a.calling_ae;
        s.peer = a.peer;
        s.frames_per_instance = in.frames;
        if (in.sop_instance_uid != sop_uid || s.sop_class_uid != in.request_sop_class_uid)
            return refuse(a, DicomStoreStatus::kDataSetDoesNotMatchSopClass,
                          "SOP class/instance in the dataset differ from the request", sop_uid);
        if (s.series_uid.empty() || s.study_uid.empty())
            return refuse(a, DicomStoreStatus::kDataSetDoesNotMatchSopClass,
                          "no StudyInstanceUID or SeriesInstanceUID", sop_uid);
        if (diskGuardActive(ctx_))
            return refuse(a, DicomStoreStatus::kOutOfResources,
                          "out of resources: spool free space below min_free_mb", sop_uid);
        auto path = ctx_.spool->beginInstance(s, sop_uid, a.id);
        if (!path.isOk())
            return refuse(a, DicomStoreStatus::kOutOfResources, path.status().toString(), sop_uid);
        const Status written = write(in, *path);
        ctx_.spool->endInstance(s.series_uid);
        if (!written.isOk())
            return refuse(a, DicomStoreStatus::kOutOfResources, written.toString(), sop_uid);
        ++ctx_.metrics->instances_received;
        return DicomStoreStatus::kSuccess;
    }

    void onAssociationEnd(const DicomAssociation& a, bool released) override {
        const auto series = ctx_.spool->endAssociation(a.id, released);
        if (!released && !series.empty())
            ctx_.audit->record(
                "association_interrupted",
                {{"calling_ae", a.calling_ae}, {"peer", a.peer}, {"series", series}});
    }

  private:
    bool callerAllowed(const DicomAssociation& a) const {
        for (const auto& c : ctx_.config->allowed_callers)
            if (c.ae_title == a.calling_ae && (c.host.empty() || c.host == a.peer)) return true;
        return false;
    }

    DicomStoreStatus refuse(const DicomAssociation& a, DicomStoreStatus status,
                            const std::string& why, const std::string& sop_uid) {
        ++ctx_.metrics->instances_refused;
        log::warning(kComponent, "C-STORE of {} from {} refused: {}", sop_uid, a.calling_ae, why);
        ctx_.audit->record("instance_refused", {{"calling_ae", a.calling_ae},
                                                {"peer", a.peer},
                                                {"sop_instance_uid", sop_uid},
                                                {"reason", why}});
        return status;
    }

    // Only after this returns OK may the sender forget the instance.
    // The SCP received the instance into a memory file (encrypted spool: only the ciphertext
    // reaches the disk) or into the spool's tmp/ folder, fsync'ed (then one rename).
    Status write(const DicomIncomingInstance& in, const std::string& path) {
        if (ctx_.key) {
            VOXSEG_ASSIGN_OR_RETURN(std::string plain, readFileBytes(in.file));
            return writeEncryptedFile(*ctx_.key, path, plain);  // fsync + rename
        }
        return in.keep(path);
    }

    const ReceiverContext ctx_;
};

}  // namespace

bool diskGuardActive(const ReceiverContext& ctx) {
    std::error_code ec;
    const auto space = fs::space(ctx.spool->root(), ec);
    if (ec) return false;
    ctx.metrics->disk_free_bytes = static_cast<int64_t>(space.available);
    const bool active = space.available < ctx.config->min_free_bytes;
    const bool was = ctx.metrics->disk_guard.exchange(active);
    if (active && !was)
        log::warning(kComponent,
                     "spool free space {} MiB below the guard {} MiB: refusing new associations",
                     space.available >> 20, ctx.config->min_free_bytes >> 20);
    if (!active && was)
        log::info(kComponent, "spool free space {} MiB above the guard again: accepting",
                  space.available >> 20);
    return active;
}

struct Receiver::Impl {
    explicit Impl(const ReceiverContext& c) : storage(c) {}
    NodeStorage storage;
    std::unique_ptr<io::DicomStorageScp> scp;
};

Receiver::Receiver(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Receiver::~Receiver() = default;  // the SCP waits for associations still running

Result<std::unique_ptr<Receiver>> Receiver::start(const ReceiverContext& context) {
    auto impl = std::make_unique<Impl>(context);
    const NodeConfig& c = *context.config;
    io::DicomScpConfig scp_config{c.ae_title, c.port, c.max_associations, c.tls};
    scp_config.receive_dir = context.spool->dir("tmp");  // emptied at start-up (Spool::open)
    scp_config.receive_in_memory = context.key != nullptr;
    auto scp = io::DicomStorageScp::start(scp_config, &impl->storage);
    if (!scp.isOk()) return Status(scp.status().code(), scp.status().message(), c.file);
    impl->scp = std::move(*scp);
    // Series whose association a killed or stopped node never saw end: their senders were not
    // told everything was stored (the markers were found by Spool::open).
    if (auto interrupted = context.spool->interruptedSeries(); !interrupted.empty()) {
        log::warning(kComponent,
                     "{} series were being received when the node stopped; waiting for their "
                     "senders to send them again",
                     interrupted.size());
        context.audit->record("association_interrupted",
                              {{"series", interrupted},
                               {"reason",
                                "the node stopped while these series arrived (found "
                                "at start-up)"}});
    }
    log::info(kComponent, "listening as {} on port {}{} ({} associations at once)", c.ae_title,
              c.port, c.tls.enabled ? " (TLS)" : "", c.max_associations);
    return std::unique_ptr<Receiver>(new Receiver(std::move(impl)));
}

void Receiver::stop() {
    if (impl_ && impl_->scp) impl_->scp->stop();
}

}  // namespace voxseg::node
