// The series browser: what a DICOM scan (io/dicom_series.h) found, as a patient / study / series
// tree with modality, description, dimensions, spacing, file count and the loader's warnings and
// split reasons. Patient name and ID are shown (the UI may show them; they are never logged).
// Activating a series (double-click, Enter, or the Load button) emits its candidate index;
// "Open beside" (the button, the context menu, Ctrl+double-click or Ctrl+Enter) asks to open it
// beside the open series instead of replacing the active one. GUI thread only.
#pragma once

#include "io/dicom_series.h"

#include <QWidget>

class QTreeWidget;
class QPushButton;

namespace voxseg::ui {

class SeriesBrowser : public QWidget {
    Q_OBJECT

  public:
    explicit SeriesBrowser(QWidget* parent = nullptr);

    void setScan(const io::DicomScanResult& scan, const QString& source);
    void clear();
    int seriesCount() const { return series_count_; }
    QTreeWidget* tree() const { return tree_; }

    QPushButton* besideButton() const { return beside_; }

  signals:
    void seriesActivated(int candidate_index);
    void seriesActivatedBeside(int candidate_index);

  protected:
    // Records whether Ctrl was held by the double-click or Enter that activates a row.
    bool eventFilter(QObject* watched, QEvent* event) override;

  private:
    void activateCurrent(bool beside);

    QTreeWidget* tree_;
    QPushButton* load_;
    QPushButton* beside_;
    bool ctrl_ = false;  // held by the last click, double-click or key on the tree
    int series_count_ = 0;
};

}  // namespace voxseg::ui
