#include "ui/code_picker.h"

#include "edit/segment_codes.h"

#include <QDialogButtonBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QVBoxLayout>

namespace voxseg::ui {
namespace {

QString itemText(const CodedConcept& c) {
    return QString("%1  (%2 %3)")
        .arg(QString::fromStdString(c.meaning), QString::fromStdString(c.scheme),
             QString::fromStdString(c.code));
}

void fill(QListWidget* list, edit::CodeGroup group, const QString& query,
          const CodedConcept& current) {
    list->clear();
    for (const CodedConcept& c : edit::searchSegmentationCodes(group, query.toStdString(), 500)) {
        auto* item = new QListWidgetItem(itemText(c), list);
        item->setData(Qt::UserRole,
                      QStringList{QString::fromStdString(c.code), QString::fromStdString(c.scheme),
                                  QString::fromStdString(c.meaning)});
        if (c.code == current.code && c.scheme == current.scheme) list->setCurrentItem(item);
    }
}

CodedConcept selected(const QListWidget* list, const CodedConcept& fallback) {
    const QListWidgetItem* item = list->currentItem();
    if (!item) return fallback;
    const QStringList v = item->data(Qt::UserRole).toStringList();
    return {v[0].toStdString(), v[1].toStdString(), v[2].toStdString()};
}

}  // namespace

CodePicker::CodePicker(const CodedConcept& category, const CodedConcept& type, QWidget* parent)
    : QDialog(parent), initial_category_(category), initial_type_(type) {
    setObjectName("code_picker");
    setWindowTitle("Segment category and type (DICOM CID 7150 / 7151)");
    search_ = new QLineEdit(this);
    search_->setObjectName("code_search");
    search_->setPlaceholderText("search: liver, artery left, 10200004 ...");
    search_->setClearButtonEnabled(true);
    categories_ = new QListWidget(this);
    categories_->setObjectName("category_list");
    types_ = new QListWidget(this);
    types_->setObjectName("type_list");
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    auto* lists = new QHBoxLayout;
    auto* left = new QVBoxLayout;
    left->addWidget(new QLabel("Category (CID 7150)", this));
    left->addWidget(categories_);
    auto* right = new QVBoxLayout;
    right->addWidget(new QLabel("Type (CID 7151)", this));
    right->addWidget(types_);
    lists->addLayout(left, 1);
    lists->addLayout(right, 2);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(search_);
    layout->addLayout(lists);
    layout->addWidget(buttons);
    connect(search_, &QLineEdit::textChanged, this, &CodePicker::refill);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    resize(720, 480);
    refill();
}

void CodePicker::setQuery(const QString& text) { search_->setText(text); }

void CodePicker::refill() {
    // Categories are few: the search narrows the types only, unless it names a category.
    const QString q = search_->text();
    const bool names_category =
        !q.isEmpty() &&
        !edit::searchSegmentationCodes(edit::CodeGroup::kCategory, q.toStdString()).empty();
    fill(categories_, edit::CodeGroup::kCategory, names_category ? q : QString(),
         selected(categories_, initial_category_));
    fill(types_, edit::CodeGroup::kType, q, selected(types_, initial_type_));
}

CodedConcept CodePicker::category() const { return selected(categories_, initial_category_); }
CodedConcept CodePicker::type() const { return selected(types_, initial_type_); }

}  // namespace voxseg::ui
