#include "io/dicom_net_move.h"

#include "io/dicom_net_scp.h"
#include "io/dicom_net_scu_setup.h"
#include "io/retrieve_folder.h"

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <fmt/format.h>

#include <atomic>
#include <mutex>

namespace voxseg::io {
namespace {

// Keeps the instances of the requested series that arrive at our SCP.
class MoveReceiver : public DicomStorageHandler {
  public:
    MoveReceiver(RetrieveFolder& folder, std::string called_ae, std::string series_uid,
                 int expected, const RetrieveCallback& progress, const CancelToken& cancel)
        : folder_(folder),
          called_ae_(std::move(called_ae)),
          series_uid_(std::move(series_uid)),
          expected_(expected),
          progress_(progress),
          cancel_(cancel) {}

    DicomAssociationDecision onAssociation(const DicomAssociation& a) override {
        if (!a.not_dicom.empty()) return DicomAssociationDecision::kRefuseCallerUnknown;
        return a.called_ae == called_ae_ ? DicomAssociationDecision::kAccept
                                         : DicomAssociationDecision::kRefuseCalledUnknown;
    }

    DicomStoreStatus onStore(const DicomAssociation&, const DicomIncomingInstance& in) override {
        std::lock_guard lock(mutex_);
        if (cancel_.isCancelled()) return DicomStoreStatus::kOutOfResources;
        if (!in.storage_class_accepted) {
            note("SOP class " + in.request_sop_class_uid + " is not an image this viewer reads");
            return DicomStoreStatus::kSopClassNotSupported;
        }
        if (!in.check.isOk()) {
            note(in.check.message());
            return in.check_status;
        }
        if (in.series_uid != series_uid_) {
            note("an instance of another series (" + in.series_uid + ") arrived");
            return DicomStoreStatus::kCannotUnderstand;
        }
        const std::string name = folder_.nextFileName();
        Status kept = in.keep(folder_.staging() + "/" + name);
        if (!kept.isOk()) {
            note(kept.message());
            return DicomStoreStatus::kOutOfResources;
        }
        folder_.added(name);
        if (progress_) progress_(folder_.count(), expected_.load());
        return DicomStoreStatus::kSuccess;
    }

    void setExpected(int n) {
        int zero = 0;
        expected_.compare_exchange_strong(zero, n);
    }
    std::string problem() {
        std::lock_guard lock(mutex_);
        return first_problem_;
    }
    int received() {
        std::lock_guard lock(mutex_);
        return folder_.count();
    }

  private:
    void note(const std::string& why) {
        if (first_problem_.empty()) first_problem_ = why;
    }
    RetrieveFolder& folder_;
    std::string called_ae_, series_uid_;
    std::atomic<int> expected_;
    const RetrieveCallback& progress_;
    CancelToken cancel_;
    std::mutex mutex_;
    std::string first_problem_;
};

// Sends one C-CANCEL when the token is set while the PACS is still moving.
class MoveScu : public Scu {
  public:
    MoveScu(const CancelToken& cancel, MoveReceiver& receiver)
        : cancel_(cancel), receiver_(receiver) {}
    OFCondition handleMOVEResponse(const T_ASC_PresentationContextID pc, RetrieveResponse* r,
                                   OFBool& wait_for_next) override {
        const OFCondition c = DcmSCU::handleMOVEResponse(pc, r, wait_for_next);
        if (r->m_status == 0xFF00)
            receiver_.setExpected(r->m_numberOfRemainingSubops + r->m_numberOfCompletedSubops +
                                  r->m_numberOfFailedSubops + r->m_numberOfWarningSubops);
        if (wait_for_next && cancel_.isCancelled() && !cancel_sent_) {
            cancel_sent_ = true;
            (void)sendCANCELRequest(pc);
        }
        return c;
    }

  private:
    CancelToken cancel_;
    MoveReceiver& receiver_;
    bool cancel_sent_ = false;
};

std::string moveStatusText(Uint16 s) {
    switch (s) {
        case 0xA701:
        case 0xA702:
            return "the PACS is out of resources";
        case 0xA801:
            return "the PACS does not know the move destination";
        case 0xA900:
            return "the PACS says the identifier does not match";
        case 0xC000:
            return "the PACS could not process the request";
        case 0xFE00:
            return "cancelled";
        default:
            return "failed";
    }
}

}  // namespace

Result<RetrievedSeries> moveSeries(const DicomPeer& peer, const MoveDestination& self,
                                   const std::string& study_uid, const std::string& series_uid,
                                   const std::string& target_folder, int expected,
                                   const RetrieveCallback& progress, const CancelToken& cancel) {
    const std::string& who = peer.label;
    if (study_uid.empty() || series_uid.empty())
        return invalidArgument("C-MOVE needs a study and a series UID", who);
    VOXSEG_ASSIGN_OR_RETURN(auto folder, RetrieveFolder::create(target_folder));
    MoveReceiver receiver(*folder, self.ae_title, series_uid, expected, progress, cancel);
    DicomScpConfig scp_config;
    scp_config.ae_title = self.ae_title;
    scp_config.port = self.port;
    scp_config.max_associations = 4;
    scp_config.tls = self.tls;
    scp_config.receive_dir = folder->staging();
    scp_config.accept_segmentations = true;  // a SEG or RTSTRUCT series is retrieved too
    auto scp = DicomStorageScp::start(scp_config, &receiver);
    if (!scp.isOk())
        return Status(scp.status().code(),
                      fmt::format("cannot receive the C-MOVE as {} on port {}: {}; pick another "
                                  "port (and tell the PACS)",
                                  self.ae_title, self.port, scp.status().message()),
                      who);

    MoveScu scu(cancel, receiver);
    setUpScu(scu, peer, self.ae_title);
    OFList<OFString> xfers;
    xfers.push_back(UID_LittleEndianExplicitTransferSyntax);
    xfers.push_back(UID_LittleEndianImplicitTransferSyntax);
    scu.addPresentationContext(UID_MOVEStudyRootQueryRetrieveInformationModel, xfers);
    DcmTlsLayerPtr tls;
    VOXSEG_RETURN_IF_ERROR(openAssociation(scu, peer, self.ae_title, tls));
    const T_ASC_PresentationContextID pc =
        scu.findPresentationContextID(UID_MOVEStudyRootQueryRetrieveInformationModel, "");
    if (pc == 0) {
        scu.abortAssociation();
        return unsupported("the peer does not accept Study Root C-MOVE requests", who);
    }
    DcmDataset keys;
    keys.putAndInsertString(DCM_QueryRetrieveLevel, "SERIES");
    keys.putAndInsertString(DCM_StudyInstanceUID, study_uid.c_str());
    keys.putAndInsertString(DCM_SeriesInstanceUID, series_uid.c_str());
    OFList<RetrieveResponse*> responses;
    const OFCondition c = scu.sendMOVERequest(pc, self.ae_title.c_str(), &keys, &responses);
    Uint16 final_status = 0xFFFF;
    int failed = 0;
    for (RetrieveResponse* r : responses) {
        final_status = r->m_status;
        failed = r->m_numberOfFailedSubops;
        delete r;
    }
    if (c.good())
        scu.releaseAssociation();
    else
        scu.abortAssociation();
    (*scp)->stop();  // every sub-operation's association has ended
    if (cancel.isCancelled()) return Status(StatusCode::kCancelled, "cancelled", who);
    // Some PACS (Orthanc) abort the association instead of answering "move destination
    // unknown" (0xA801): name the likely cause with the fix.
    if (c.bad())
        return ioError(fmt::format("C-MOVE failed: {}; if the PACS does not know the move "
                                   "destination {}, add {} (this computer, port {}) to its DICOM "
                                   "nodes",
                                   c.text(), self.ae_title, self.ae_title, self.port),
                       who);
    if (final_status == 0xA801)
        return notFound(fmt::format("the PACS does not know the move destination {}; add {} "
                                    "(this computer, port {}) to the PACS's DICOM nodes",
                                    self.ae_title, self.ae_title, self.port),
                        who);
    const std::string problem = receiver.problem();
    if (final_status != 0x0000 || failed > 0 || !problem.empty())
        return ioError(fmt::format("C-MOVE of series {} {} (status 0x{:04X}, {} failed, {} "
                                   "received){}",
                                   series_uid, moveStatusText(final_status), final_status, failed,
                                   receiver.received(), problem.empty() ? "" : ": " + problem),
                       who);
    if (receiver.received() == 0)
        return notFound("the PACS moved no instance of series " + series_uid, who);
    return folder->commit();
}

}  // namespace voxseg::io
