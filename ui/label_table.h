// The label table: one row per label of the shown label map with visibility (checkbox), colour,
// name (double-click to rename), review status, volume in mL and the image's mean +- SD inside
// the label (HU on CT; both from pipeline::computeStatistics, recomputed after edits on a worker
// thread by the edit controller), the SEG category / type codes (picked from DICOM CID 7150/7151,
// ui/code_picker.h), value, and, shown from the header's context menu, voxel count and opacity
// (overlay and 3D view). The columns a reader works with come first so that they fit the
// dock; a change updates the rows in place (the scroll position and the selection stay).
// Review at speed: "Accept and next" (key A; C corrected, X rejected, N next without a status)
// sets the selected label's status and selects the next label not reviewed yet, with the
// crosshair on it; the count above the table says how many are reviewed ("12 of 31 reviewed").
// Buttons add and delete labels (a delete clears the label's voxels through the edit controller
// first); a filter shows only the labels of one review status. After a model run, a line above
// the table gives the run's warnings (input outside the model's intended input, implausible
// volumes) and the model's declared measurements (e.g. TIV), and a label whose volume is outside
// the model's plausible range has a warning icon and tooltip on its volume (setModelFindings;
// cleared when another label map is shown). Edits go to the ViewerState; the table follows its
// signals. GUI thread only.
#pragma once

#include "core/status.h"
#include "edit/segment_meta.h"
#include "pipeline/statistics.h"

#include <QWidget>

#include <functional>
#include <map>
#include <optional>

class QAction;
class QLabel;
class QTableWidget;
class QComboBox;
class QPushButton;

namespace voxseg::ui {

class ViewerState;
class CodePicker;

class LabelTable : public QWidget {
    Q_OBJECT

  public:
    enum Column { kName = 0, kStatus, kVolume, kMean, kCodes, kValue, kVoxels, kOpacity, kColumns };

    explicit LabelTable(ViewerState* state, QWidget* parent = nullptr);
    QTableWidget* table() const { return table_; }
    QComboBox* statusFilter() const { return filter_; }
    QPushButton* addButton() const { return add_; }
    QPushButton* deleteButton() const { return delete_; }
    QPushButton* acceptNextButton() const { return accept_next_; }
    QLabel* progressLabel() const { return progress_; }
    // The review keys' actions (A, C, X, N), window shortcuts.
    QAction* acceptNextAction() const { return accept_next_action_; }
    // Sets the selected row's status (none selected: the first row not reviewed) and selects
    // the next row below it (wrapping) that is not reviewed and not filtered out, with the
    // crosshair at its centroid; false when none is left. `status` nullopt: only moves.
    bool reviewAndNext(std::optional<edit::ReviewStatus> status);
    // "12 of 31 reviewed".
    QString progressText() const;
    // Moves the crosshair to the centroid of the label in `row` (as a double-click does).
    void goToLabel(int row);
    // Opens a colour dialog for the label in `row` (also from the row's context menu).
    void chooseColor(int row);
    // Opens the category/type picker for `row` (non-modal; applied when accepted).
    CodePicker* editCodes(int row);
    // Clears a label's voxels before its row is removed; set by the window (edit controller).
    void setClearLabel(std::function<Status(int value)> clear) { clear_label_ = std::move(clear); }
    // Adds a label (the lowest free value) and makes it the row selected; returns its value.
    int addLabel();
    Status deleteLabel(int row);
    // A model run's findings (its statistics: warnings, per label implausible, measurements),
    // for the label map just shown.
    void setModelFindings(const pipeline::StatisticsReport& run);
    QLabel* findingsLabel() const { return findings_; }
    // The implausible-volume note on label `value` ("" when none).
    QString labelFlag(int value) const;

  signals:
    // A label was added or selected: the edit toolbar paints it.
    void labelActivated(int value);
    // reviewAndNext found no label left to review.
    void reviewFinished();

  private:
    // The constructor's parts.
    void setUpTable();
    void addReviewKeys();  // A, C, X, N: window shortcuts
    void connectTable();
    void rebuild();
    // Updates the rows' cells in place; false when the rows no longer match the labels.
    bool refreshRows();
    void fillRow(int r);
    void syncDisplay();
    void applyFilter();

    ViewerState* state_;
    QTableWidget* table_;
    QComboBox* mode_;
    QComboBox* filter_;
    QPushButton* add_;
    QPushButton* delete_;
    QPushButton* accept_next_;
    QLabel* progress_;
    QLabel* findings_;
    std::map<int, QString> flags_;  // label value -> implausible-volume note
    QAction* accept_next_action_;
    std::function<Status(int)> clear_label_;
    bool updating_ = false;
};

}  // namespace voxseg::ui
