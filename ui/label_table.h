// The label table: one row per label of the shown label map with visibility (checkbox), colour,
// name, value, voxel count, volume in mL (pipeline::computeStatistics) and opacity. Edits go to
// the ViewerState; the table follows the state's signals. GUI thread only.
#pragma once

#include <QWidget>

class QTableWidget;
class QComboBox;

namespace voxseg::ui {

class ViewerState;

class LabelTable : public QWidget {
    Q_OBJECT

  public:
    explicit LabelTable(ViewerState* state, QWidget* parent = nullptr);
    QTableWidget* table() const { return table_; }
    // Opens a colour dialog for the label in `row` (also from the row's context menu).
    void chooseColor(int row);

  private:
    void rebuild();
    void syncDisplay();

    ViewerState* state_;
    QTableWidget* table_;
    QComboBox* mode_;
    bool updating_ = false;
};

}  // namespace voxseg::ui
