// The label table: one row per label of the shown label map with visibility (checkbox), colour,
// name (double-click to rename), value, voxel count, volume in mL (pipeline::computeStatistics,
// recomputed after edits), opacity (overlay and 3D view), review status and the SEG category /
// type codes (picked from DICOM CID 7150/7151, ui/code_picker.h). Buttons add and delete labels
// (a delete clears the label's voxels through the edit controller first); a filter shows only
// the labels of one review status. Edits go to the ViewerState; the table follows its signals.
// GUI thread only.
#pragma once

#include "core/status.h"

#include <QWidget>

#include <functional>

class QTableWidget;
class QComboBox;
class QPushButton;

namespace voxseg::ui {

class ViewerState;
class CodePicker;

class LabelTable : public QWidget {
    Q_OBJECT

  public:
    enum Column { kName = 0, kValue, kVolume, kVoxels, kOpacity, kStatus, kCodes, kColumns };

    explicit LabelTable(ViewerState* state, QWidget* parent = nullptr);
    QTableWidget* table() const { return table_; }
    QComboBox* statusFilter() const { return filter_; }
    QPushButton* addButton() const { return add_; }
    QPushButton* deleteButton() const { return delete_; }
    // Opens a colour dialog for the label in `row` (also from the row's context menu).
    void chooseColor(int row);
    // Opens the category/type picker for `row` (non-modal; applied when accepted).
    CodePicker* editCodes(int row);
    // Clears a label's voxels before its row is removed; set by the window (edit controller).
    void setClearLabel(std::function<Status(int value)> clear) { clear_label_ = std::move(clear); }
    // Adds a label (the lowest free value) and makes it the row selected; returns its value.
    int addLabel();
    Status deleteLabel(int row);

  signals:
    // A label was added or selected: the edit toolbar paints it.
    void labelActivated(int value);

  private:
    void rebuild();
    void syncDisplay();
    void applyFilter();

    ViewerState* state_;
    QTableWidget* table_;
    QComboBox* mode_;
    QComboBox* filter_;
    QPushButton* add_;
    QPushButton* delete_;
    std::function<Status(int)> clear_label_;
    bool updating_ = false;
};

}  // namespace voxseg::ui
