// "Compare with segmentation...": a second segmentation of the shown image (a label map, DICOM
// SEG or RTSTRUCT, read by edit/segmentation_load.h on the image's grid) compared with the shown
// one label by label (edit/segmentation_compare.h: Dice, volumes, difference), its contours drawn
// over every view in one colour (drawComparison, from MprView), and a panel with the table.
// The shown map is "a", the loaded one "b". The table is recomputed when the shown label map is
// replaced and by "Recompute" (after edits: a whole-volume pass, not run on every edit).
// GUI thread only.
#pragma once

#include "core/status.h"
#include "core/volume.h"
#include "edit/segmentation_compare.h"
#include "ui/mpr_slice.h"

#include <QImage>
#include <QObject>
#include <QString>
#include <QWidget>

#include <vector>

class QCheckBox;
class QLabel;
class QPainter;
class QTableWidget;

namespace voxseg::ui {

class MprView;
class ViewerState;

class SegmentationComparison : public QObject {
    Q_OBJECT

  public:
    explicit SegmentationComparison(ViewerState* state, QObject* parent = nullptr);
    ViewerState* state() const { return state_; }
    // Reads `path` on the shown image's grid and compares; errors name the file.
    Status load(const QString& path);
    // The same with a map already on the grid (tests, scripts).
    Status setOther(Volume label_map, const QString& source);
    void clear();
    bool active() const { return !other_.empty(); }
    const Volume& other() const { return other_; }
    const QString& source() const { return source_; }
    // Per label, ascending; empty without a shown label map.
    const std::vector<edit::LabelAgreement>& agreement() const { return agreement_; }
    Status recompute();
    bool contoursShown() const { return shown_; }
    void setContoursShown(bool shown);
    // The other map's contours on `slice` of `frame` (transparent elsewhere), native size.
    QImage contours(const SliceFrame& frame, int64_t slice) const;

    static constexpr QRgb kContourColor = 0xFFFF40FF;  // magenta: not a label colour

  signals:
    void changed();

  private:
    ViewerState* state_;
    Volume other_;
    QString source_;
    std::vector<edit::LabelAgreement> agreement_;
    LabelColors colors_;  // every value of other_ in kContourColor
    bool shown_ = true;
};

// Draws the comparison's contours over `view`'s slice (nothing when inactive or hidden).
void drawComparison(QPainter& p, const MprView& view, const SegmentationComparison& comparison);

// The table: label (the shown map's name), Dice, mL shown / loaded, difference in mL and %.
class ComparisonPanel : public QWidget {
    Q_OBJECT

  public:
    ComparisonPanel(SegmentationComparison* comparison, ViewerState* state,
                    QWidget* parent = nullptr);
    QTableWidget* table() const { return table_; }
    QCheckBox* contoursBox() const { return contours_; }

  private:
    void refresh();

    SegmentationComparison* comparison_;
    ViewerState* state_;
    QLabel* title_;
    QTableWidget* table_;
    QCheckBox* contours_;
};

}  // namespace voxseg::ui
