#include "ui/interactive_toolbar.h"

#include "ui/edit_controller.h"
#include "ui/interactive_tool.h"

#include <QAction>
#include <QActionGroup>
#include <QCheckBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>

namespace voxseg::ui {

InteractiveToolbar::InteractiveToolbar(EditController* controller, QWidget* parent)
    : QToolBar("Interactive", parent), edit_(controller) {
    setObjectName("interactive_toolbar");
    InteractiveTool* tool = edit_->interactive();
    model_ = addAction("Model...", this, [this, tool] {
        const QString start = tool->modelFolder().isEmpty()
                                  ? InteractiveTool::rememberedModelFolder()
                                  : tool->modelFolder();
        const QString folder = QFileDialog::getExistingDirectory(
            this, "Interactive model package (folder with model.json)", start);
        if (!folder.isEmpty()) tool->loadModel(folder);
    });
    model_->setObjectName("interactive_model");
    model_->setToolTip(
        "Choose the interactive model package folder (model.json with an \"interactive\" "
        "section; docs/interactive.md)");
    model_label_ = new QLabel(" no model ", this);
    model_label_->setObjectName("interactive_model_label");
    addWidget(model_label_);
    // The model on an image it is not made for (a demo trained at 3 mm on a 0.75 mm CT): said
    // before the first prompt, the findings in the tooltip.
    input_warning_ =
        new QLabel(QString::fromUtf8(" \u26A0 image outside the model's intended input "), this);
    input_warning_->setObjectName("interactive_input_warning");
    input_warning_->setStyleSheet("QLabel { color: #b35900; }");
    input_action_ = addWidget(input_warning_);
    input_action_->setVisible(false);
    connect(tool, &InteractiveTool::inputFindingsChanged, this, &InteractiveToolbar::sync);
    addSeparator();
    buildKinds();
    include_ = addAction("Include", this, [tool](bool on) { tool->setInclude(on); });
    include_->setObjectName("interactive_include");
    include_->setCheckable(true);
    include_->setChecked(true);
    include_->setShortcut(QKeySequence(Qt::Key_T));
    include_->setToolTip(
        "Include (checked) or exclude prompts (T toggles; Shift+click or right click excludes "
        "one prompt)");
    connect(include_, &QAction::toggled, this,
            [this](bool on) { include_->setText(on ? "Include" : "Exclude"); });
    autozoom_ = new QCheckBox("AutoZoom", this);
    autozoom_->setObjectName("interactive_autozoom");
    autozoom_->setChecked(tool->autoZoom());
    autozoom_->setToolTip("nnInteractive's AutoZoom: widen the window when the object grows");
    connect(autozoom_, &QCheckBox::toggled, this, [tool](bool on) { tool->setAutoZoom(on); });
    addWidget(autozoom_);
    addSeparator();
    next_ = addAction("Next object", this, [this] { (void)edit_->nextObject(); });
    next_->setObjectName("interactive_next_object");
    next_->setShortcut(QKeySequence(Qt::Key_E));
    next_->setToolTip(
        "Next object (E): write the current object into the active label and start a new "
        "object in a new label");
    reset_ = addAction("Reset object", this, [tool] { (void)tool->resetObject(); });
    reset_->setObjectName("interactive_reset");
    reset_->setShortcut(QKeySequence(Qt::ALT | Qt::Key_R));
    reset_->setToolTip("Reset object (Alt+R): clear the current object's prompts");
    latency_ = new QLabel(" ", this);
    latency_->setObjectName("interactive_latency");
    addWidget(latency_);

    connect(tool, &InteractiveTool::modelChanged, this, &InteractiveToolbar::sync);
    connect(tool, &InteractiveTool::latencyChanged, this, [this](double ms, const QString&) {
        latency_->setText(QString(" last prompt %1 ms ").arg(ms, 0, 'f', 0));
    });
    connect(tool, &InteractiveTool::pendingChanged, this, [this, tool](int pending) {
        const QString last =
            tool->lastLatencyMs() < 0
                ? QString()
                : QString("last prompt %1 ms").arg(tool->lastLatencyMs(), 0, 'f', 0);
        latency_->setText(
            " " + (pending > 0 ? QString("running (%1 queued) ").arg(pending - 1) : QString()) +
            last + " ");
    });
    connect(tool, &InteractiveTool::progressed, this, [this, tool](int done, int planned) {
        const int queued = tool->pending() - 1;
        latency_->setText(QString(" running: network call %1%2%3 ")
                              .arg(done)
                              .arg(planned > 0 ? QString(" of %1").arg(planned) : QString())
                              .arg(queued > 0 ? QString(" (%1 queued)").arg(queued) : QString()));
    });
    connect(edit_, &EditController::toolChanged, this, &InteractiveToolbar::sync);
    sync();
}

void InteractiveToolbar::buildKinds() {
    kinds_ = new QActionGroup(this);
    const std::pair<PromptKind, std::pair<const char*, Qt::Key>> specs[] = {
        {PromptKind::kPoint, {"Point", Qt::Key_P}},
        {PromptKind::kBox, {"Box", Qt::Key_B}},
        {PromptKind::kScribble, {"Scribble", Qt::Key_S}},
        {PromptKind::kLasso, {"Lasso", Qt::Key_L}},
    };
    for (const auto& [kind, spec] : specs) {
        QAction* a = addAction(spec.first);
        a->setObjectName(QString("interactive_") + promptKindName(kind));
        a->setCheckable(true);
        a->setShortcut(QKeySequence(spec.second));
        a->setData(static_cast<int>(kind));
        a->setToolTip(QString("%1 prompt (%2; selects the Interactive tool)")
                          .arg(spec.first, QKeySequence(spec.second).toString()));
        kinds_->addAction(a);
        kind_actions_ << a;
    }
    connect(kinds_, &QActionGroup::triggered, this, [this](QAction* a) {
        edit_->interactive()->setKind(static_cast<PromptKind>(a->data().toInt()));
        edit_->setTool(EditTool::kInteractive);
    });
}

QAction* InteractiveToolbar::kindAction(int kind) const {
    for (QAction* a : kind_actions_)
        if (a->data().toInt() == kind) return a;
    return nullptr;
}

void InteractiveToolbar::sync() {
    InteractiveTool* tool = edit_->interactive();
    for (QAction* a : kind_actions_)
        a->setChecked(a->data().toInt() == static_cast<int>(tool->kind()));
    model_label_->setText(tool->hasModel() ? QString(" %1 (%2) ")
                                                 .arg(QFileInfo(tool->modelFolder()).fileName(),
                                                      tool->modelDescription())
                                           : QString(" no model "));
    model_label_->setToolTip(tool->modelFolder());
    const QStringList& findings = tool->inputFindings();
    input_warning_->setToolTip(findings.join("\n\n"));
    input_action_->setVisible(!findings.isEmpty());
}

}  // namespace voxseg::ui
