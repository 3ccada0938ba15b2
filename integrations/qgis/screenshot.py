"""A picture of Tessera's outputs as QGIS draws them, rendered headless by QGIS itself: the scene,
its labels (paletted with the checkpoint's names and colours, from the .qml beside them) half
transparent over it, and a legend of the classes, laid out with QgsLayout and exported as PNG.

Usage: QT_QPA_PLATFORM=offscreen python3 screenshot.py SCENE LABELS OUT.png [TITLE]
(docs/analysts.md, "In QGIS", shows the command that made its figure.)
"""
import sys

from qgis.core import (QgsApplication, QgsLayout, QgsLayoutExporter, QgsLayoutItemLabel, QgsLayoutItemLegend,
                       QgsLayoutItemMap, QgsLayoutPoint, QgsLayoutSize, QgsProject, QgsRasterLayer, QgsUnitTypes)
from qgis.PyQt.QtGui import QFont

scene_path, labels_path, out = sys.argv[1:4]
title = sys.argv[4] if len(sys.argv) > 4 else "Tessera labels in QGIS"
app = QgsApplication([], False)
app.initQgis()
project = QgsProject.instance()
scene = QgsRasterLayer(scene_path, "scene", "gdal")
labels = QgsRasterLayer(labels_path, "labels", "gdal")
if not (scene.isValid() and labels.isValid()):
    sys.exit(f"screenshot.py: QGIS cannot open {scene_path} or {labels_path}")
labels.loadDefaultStyle()
labels.renderer().setOpacity(0.55)
project.addMapLayers([scene, labels])

layout = QgsLayout(project)
layout.initializeDefaults()
page = layout.pageCollection().page(0)
page.setPageSize(QgsLayoutSize(240, 170, QgsUnitTypes.LayoutMillimeters))
canvas = QgsLayoutItemMap(layout)
canvas.attemptMove(QgsLayoutPoint(5, 15, QgsUnitTypes.LayoutMillimeters))
canvas.attemptResize(QgsLayoutSize(150, 150, QgsUnitTypes.LayoutMillimeters))
canvas.setLayers([labels, scene])
canvas.setExtent(scene.extent())
canvas.setFrameEnabled(True)
layout.addLayoutItem(canvas)
heading = QgsLayoutItemLabel(layout)
heading.setText(title)
heading.setFont(QFont("DejaVu Sans", 14))
heading.attemptMove(QgsLayoutPoint(5, 4, QgsUnitTypes.LayoutMillimeters))
heading.attemptResize(QgsLayoutSize(230, 10, QgsUnitTypes.LayoutMillimeters))
layout.addLayoutItem(heading)
legend = QgsLayoutItemLegend(layout)
legend.setLinkedMap(canvas)
legend.setAutoUpdateModel(False)
legend.model().rootGroup().clear()
legend.model().rootGroup().addLayer(labels)
legend.setTitle("Classes")
legend.attemptMove(QgsLayoutPoint(160, 15, QgsUnitTypes.LayoutMillimeters))
layout.addLayoutItem(legend)
settings = QgsLayoutExporter.ImageExportSettings()
settings.dpi = 110
settings.exportMetadata = False  # a plain picture: no world file, no georeferencing written into the PNG
settings.generateWorldFile = False
result = QgsLayoutExporter(layout).exportToImage(out, settings)
if result != QgsLayoutExporter.Success:
    sys.exit(f"screenshot.py: QGIS could not export {out} (error {result})")
print(f"{out}: the scene, its labels and their legend, rendered by QGIS")
app.exitQgis()
