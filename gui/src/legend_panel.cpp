#include "legend_panel.hpp"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QSlider>
#include <QTableWidget>
#include <QVBoxLayout>

#include "readout.hpp"

namespace tessera::gui {

LegendPanel::LegendPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Opacity"), this));
  opacity_ = new QSlider(Qt::Horizontal, this);
  opacity_->setRange(0, 100);
  opacity_->setValue(int(style_.opacity * 100 + 0.5f));
  row->addWidget(opacity_);
  layout->addLayout(row);
  outline_ = new QCheckBox(tr("Outline only"), this);
  only_selected_ = new QCheckBox(tr("Show only selected"), this);
  layout->addWidget(outline_);
  layout->addWidget(only_selected_);
  table_ = new QTableWidget(0, 3, this);
  table_->setHorizontalHeaderLabels({tr("Label"), tr("Name"), tr("Pixels")});
  table_->verticalHeader()->hide();
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(table_);

  connect(opacity_, &QSlider::valueChanged, this, [this](int v) {
    style_.opacity = float(v) / 100.0f;
    emit styleChanged(style_);
  });
  connect(outline_, &QCheckBox::toggled, this, [this](bool on) {
    style_.outline = on;
    emit styleChanged(style_);
  });
  connect(only_selected_, &QCheckBox::toggled, this, [this] { rebuildOnly(); });
  connect(table_, &QTableWidget::itemSelectionChanged, this, [this] { rebuildOnly(); });
  connect(table_, &QTableWidget::itemChanged, this, [this](QTableWidgetItem* item) {
    if (updating_ || item->column() != 0) return;
    const int label = item->data(Qt::UserRole).toInt();
    style_.visible[size_t(label)] = item->checkState() == Qt::Checked;
    emit styleChanged(style_);
  });
}

void LegendPanel::setStyle(const OverlayStyle& style) {
  style_ = style;
  updating_ = true;
  opacity_->setValue(int(style_.opacity * 100 + 0.5f));
  outline_->setChecked(style_.outline);
  for (int r = 0; r < table_->rowCount(); ++r) {
    auto* item = table_->item(r, 0);
    item->setCheckState(style_.visible[size_t(item->data(Qt::UserRole).toInt())] ? Qt::Checked : Qt::Unchecked);
  }
  updating_ = false;
  emit styleChanged(style_);
}

void LegendPanel::setLabels(const std::array<std::string, 256>& names, const std::array<int64_t, 256>& counts) {
  updating_ = true;
  table_->setRowCount(0);
  bool any_count = false;
  for (auto c : counts) any_count = any_count || c > 0;
  for (int l = 0; l < 256; ++l) {
    if (any_count ? counts[size_t(l)] == 0 : names[size_t(l)].empty()) continue;
    const int r = table_->rowCount();
    table_->insertRow(r);
    auto* id = new QTableWidgetItem(QString::number(l));
    id->setData(Qt::UserRole, l);
    id->setFlags(id->flags() | Qt::ItemIsUserCheckable);
    id->setCheckState(style_.visible[size_t(l)] ? Qt::Checked : Qt::Unchecked);
    id->setData(Qt::DecorationRole, QColor::fromRgb(style_.colors[size_t(l)]));
    table_->setItem(r, 0, id);
    table_->setItem(r, 1, new QTableWidgetItem(label_name(names, l)));
    table_->setItem(r, 2, new QTableWidgetItem(any_count ? QLocale().toString(qlonglong(counts[size_t(l)])) : "…"));
  }
  table_->resizeColumnsToContents();
  updating_ = false;
}

int LegendPanel::selectedLabel() const {
  const auto rows = table_->selectionModel()->selectedRows();
  if (rows.isEmpty()) return -1;
  return table_->item(rows.front().row(), 0)->data(Qt::UserRole).toInt();
}

void LegendPanel::rebuildOnly() {
  const int sel = only_selected_->isChecked() ? selectedLabel() : -1;
  if (sel == style_.only_label) return;
  style_.only_label = sel;
  emit styleChanged(style_);
}

void LegendPanel::setOpacity(double alpha) { opacity_->setValue(int(alpha * 100 + 0.5)); }
void LegendPanel::setOutline(bool on) { outline_->setChecked(on); }
void LegendPanel::setShowOnlySelected(bool on) { only_selected_->setChecked(on); }

void LegendPanel::setLabelVisible(int label, bool visible) {
  for (int r = 0; r < table_->rowCount(); ++r)
    if (table_->item(r, 0)->data(Qt::UserRole).toInt() == label) {
      table_->item(r, 0)->setCheckState(visible ? Qt::Checked : Qt::Unchecked);
      return;
    }
  style_.visible[size_t(label)] = visible;
  emit styleChanged(style_);
}

void LegendPanel::selectLabel(int label) {
  for (int r = 0; r < table_->rowCount(); ++r)
    if (table_->item(r, 0)->data(Qt::UserRole).toInt() == label) table_->selectRow(r);
}

}  // namespace tessera::gui
