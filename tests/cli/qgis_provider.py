"""PyQGIS side of tests/cli/qgis_provider.sh.

Usage: qgis_provider.py check SCENE LABELS VECTORS NAME...
         the label raster opens in QGIS paletted, its classes 0..k-1 named NAME... in the colours
         of its GDAL colour table; CRS and extent are the scene's; the polygons open categorised
         by class_id, one category per class present in the file, with the same names and colours
       qgis_provider.py cancel PLUGINS CHECKPOINT SCENE OUT_FOLDER
         runs tessera:segment_raster from the plugin installed in PLUGINS and cancels it once its
         progress (relayed from tessera) passes 0: the algorithm fails, its progress rose above
         0 and stayed below 100, no tessera child is left, OUT_FOLDER holds nothing
"""
import os
import sys

from osgeo import gdal, ogr
from qgis.core import (QgsApplication, QgsCategorizedSymbolRenderer, QgsCoordinateReferenceSystem,
                       QgsPalettedRasterRenderer, QgsProcessingException, QgsProcessingFeedback, QgsRasterLayer,
                       QgsRectangle, QgsVectorLayer)

gdal.UseExceptions()
failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += not ok


def check_outputs(scene, labels, vectors, names):
    ds = gdal.Open(labels)
    table = ds.GetRasterBand(1).GetColorTable()
    palette = {k: "#%02x%02x%02x" % table.GetColorEntry(k)[:3] for k in range(len(names))}
    layer = QgsRasterLayer(labels, "labels", "gdal")
    check(layer.isValid(), f"QGIS opens {labels}")
    message, ok = layer.loadDefaultStyle()
    check(ok, f"its default style (the .qml beside it) loads: {message}")
    renderer = layer.renderer()
    check(isinstance(renderer, QgsPalettedRasterRenderer), f"renderer {renderer.type()} is paletted")
    if isinstance(renderer, QgsPalettedRasterRenderer):
        classes = [(int(c.value), c.label, c.color.name()) for c in renderer.classes()]
        expected = [(k, n, palette[k]) for k, n in enumerate(names)]
        check(classes == expected, f"classes, names and colours {classes} are the colour table's {expected}")
    scene_ds = gdal.Open(scene)
    scene_crs = QgsCoordinateReferenceSystem.fromWkt(scene_ds.GetProjection())
    check(layer.crs() == scene_crs and scene_crs.isValid(), f"CRS {layer.crs().authid()} is the scene's {scene_crs.authid()}")
    gt, w, h = scene_ds.GetGeoTransform(), scene_ds.RasterXSize, scene_ds.RasterYSize
    extent = QgsRectangle(gt[0], gt[3] + h * gt[5], gt[0] + w * gt[1], gt[3])
    check(layer.extent() == extent, f"extent {layer.extent().toString(3)} is the scene's {extent.toString(3)}")

    polygons = QgsVectorLayer(vectors, "polygons", "ogr")
    check(polygons.isValid(), f"QGIS opens {vectors}")
    message, ok = polygons.loadDefaultStyle()
    check(ok, f"its default style loads: {message}")
    renderer = polygons.renderer()
    check(isinstance(renderer, QgsCategorizedSymbolRenderer) and renderer.classAttribute() == "class_id",
          f"renderer {renderer.type()} categorised by {getattr(renderer, 'classAttribute', lambda: '-')()}")
    source = ogr.Open(vectors)  # kept: a layer outliving its data source crashes
    present = sorted({f.GetField("class_id") for f in source.GetLayer(0)})
    if isinstance(renderer, QgsCategorizedSymbolRenderer):
        categories = [(int(c.value()), c.label(), c.symbol().color().name()) for c in renderer.categories()]
        expected = [(k, names[k], palette[k]) for k in present]
        check(categories == expected, f"categories {categories} are the classes present {expected}")
    check(polygons.crs() == scene_crs, f"polygons' CRS {polygons.crs().authid()} is the scene's")


def cancel(plugins, checkpoint, scene, out):
    sys.path.insert(0, plugins)
    sys.path.insert(0, "/usr/share/qgis/python/plugins")
    import processing
    from processing.core.Processing import Processing
    from tessera_processing.provider import TesseraProvider
    Processing.initialize()
    provider = TesseraProvider()
    QgsApplication.processingRegistry().addProvider(provider)
    feedback = QgsProcessingFeedback()
    seen = []

    def on_progress(p):
        seen.append(p)
        if p > 0:
            feedback.cancel()
    feedback.progressChanged.connect(on_progress)
    params = {"CHECKPOINT": checkpoint, "INPUT": scene, "TILE": "64", "THREADS": 1,
              "OUTPUT": os.path.join(out, "labels.tif"), "VECTORS": os.path.join(out, "polygons.gpkg")}
    try:
        processing.run("tessera:segment_raster", params, feedback=feedback)
        check(False, "the cancelled algorithm failed")
    except QgsProcessingException as e:
        check(True, f"the cancelled algorithm failed: {e}")
    check(any(0 < p < 100 for p in seen), f"tessera's progress was relayed: {len(seen)} updates, first {seen[:3]}")
    left = os.listdir(out) if os.path.isdir(out) else []
    check(not left, f"nothing left in the output folder ({left})")
    children = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if os.path.join(out, "labels.tif").encode() in f.read():  # tessera's --output
                    children.append(pid)
        except OSError:
            pass
    check(not children, f"no tessera child left ({children})")


app = QgsApplication([], False)
app.initQgis()
if sys.argv[1] == "check":
    check_outputs(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
else:
    cancel(*sys.argv[2:6])
app.exitQgis()
sys.exit(1 if failures else 0)
