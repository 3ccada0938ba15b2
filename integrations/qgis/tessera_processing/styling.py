"""Tessera's outputs as QGIS shows them: the label raster paletted with the checkpoint's class
names and colours (the QGIS style <labels minus .tif>.qml that `tessera infer` writes beside
it), and the polygons categorised by class_id with the same names and colours, saved as
<polygons minus extension>.qml beside them so QGIS applies it whenever the file is opened.
"""
import os

from qgis.core import (QgsCategorizedSymbolRenderer, QgsFillSymbol, QgsPalettedRasterRenderer,
                       QgsProcessingLayerPostProcessorInterface, QgsRasterLayer, QgsRendererCategory,
                       QgsVectorLayer)


def style_path(path):
    """The .qml beside a file, as Tessera and QGIS name it (labels.cog.tif -> labels.cog.qml)."""
    return os.path.splitext(path)[0] + ".qml"


def label_classes(labels_path):
    """[(class id, name, QColor)] of the label raster, from its QGIS style."""
    layer = QgsRasterLayer(labels_path, "labels", "gdal")
    layer.loadNamedStyle(style_path(labels_path))
    renderer = layer.renderer()
    if not isinstance(renderer, QgsPalettedRasterRenderer):
        return []
    return [(int(c.value), c.label, c.color) for c in renderer.classes()]


def categorized_renderer(classes, field="class_id"):
    """Polygons categorised by `field` with the labels' names and colours."""
    categories = []
    for value, name, color in classes:
        symbol = QgsFillSymbol.createSimple({"outline_style": "no", "color": color.name()})
        categories.append(QgsRendererCategory(value, symbol, name))
    return QgsCategorizedSymbolRenderer(field, categories)


def write_vector_style(vectors_path, classes):
    """The categorised style of the polygons as <vectors>.qml (written whole, then renamed)."""
    layer = QgsVectorLayer(vectors_path, "polygons", "ogr")
    if not layer.isValid():
        raise RuntimeError(f"{vectors_path}: QGIS cannot open the polygons")
    present = set(layer.uniqueValues(layer.fields().indexOf("class_id")))
    layer.setRenderer(categorized_renderer([c for c in classes if c[0] in present]))
    final = style_path(vectors_path)
    temporary = final[:-4] + f".partial-{os.getpid()}.qml"
    message, ok = layer.saveNamedStyle(temporary)
    if not ok:
        raise RuntimeError(f"{final}: cannot write the style: {message}")
    os.replace(temporary, final)


class LoadStyle(QgsProcessingLayerPostProcessorInterface):
    """Applies the .qml beside an output when Processing loads it into the project."""

    def postProcessLayer(self, layer, context, feedback):  # noqa: N802 (QGIS's name)
        qml = style_path(layer.source().split("|")[0])
        if os.path.exists(qml):
            layer.loadNamedStyle(qml)
            layer.triggerRepaint()


LOAD_STYLE = LoadStyle()  # kept alive here: Processing holds only a pointer
