// The views area of voxseg-viewer's main window: the three MPR panels (a view and its slice
// slider) and the 3D pane, arranged 1x3 (axial | coronal | sagittal) or 2x2 (axial | sagittal
// over coronal | 3D, ITK-SNAP's arrangement), and one pane maximised over the whole area (a
// double-click on a view or F; MainWindow decides which) until it is restored. The 3D pane is
// made by `make_surface` on first use in 2x2: an OpenGL context costs nothing in 1x3. Owns no
// pane's state: maximising hides the others, it never recreates a view. GUI thread only.
#pragma once

#include <QWidget>

#include <array>
#include <functional>

class QGridLayout;

namespace voxseg::ui {

class ViewGrid : public QWidget {
    Q_OBJECT

  public:
    enum class Layout { k1x3, k2x2 };

    ViewGrid(std::function<QWidget*(QWidget* parent)> make_surface, QWidget* parent = nullptr);

    // The axial, coronal and sagittal panels, in that order, children of this widget.
    void setPanels(const std::array<QWidget*, 3>& panels);
    // Arranges the panes; a maximised pane is restored first.
    void setLayoutMode(Layout layout);
    Layout layoutMode() const { return layout_; }
    // The 3D pane; nullptr until the 2x2 layout is first shown.
    QWidget* surface() const { return surface_; }

    // Shows `pane` (a panel or the 3D pane) alone over the whole area.
    void maximize(QWidget* pane);
    // Back to the layout.
    void restore() { setLayoutMode(layout_); }
    // `pane` maximised, or the layout back when `pane` is the maximised one (or nullptr).
    void toggleMaximized(QWidget* pane);
    // The maximised pane; nullptr while the layout is shown.
    QWidget* maximized() const { return maximized_; }

  signals:
    void arrangementChanged();

  private:
    void clearGrid();

    std::function<QWidget*(QWidget*)> make_surface_;
    QGridLayout* grid_;
    std::array<QWidget*, 3> panels_{};
    QWidget* surface_ = nullptr;
    QWidget* maximized_ = nullptr;
    Layout layout_ = Layout::k1x3;
};

}  // namespace voxseg::ui
