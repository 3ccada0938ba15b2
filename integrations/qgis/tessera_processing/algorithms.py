"""The provider's algorithms. Each builds a `tessera` command line from its parameters and runs
it (runner.py); Segment raster then loads its outputs styled (styling.py)."""
import json
import os

from qgis.core import (QgsProcessing, QgsProcessingAlgorithm, QgsProcessingException,
                       QgsProcessingOutputString, QgsProcessingParameterBoolean, QgsProcessingParameterEnum,
                       QgsProcessingParameterFile, QgsProcessingParameterFileDestination,
                       QgsProcessingParameterNumber, QgsProcessingParameterRasterDestination,
                       QgsProcessingParameterRasterLayer, QgsProcessingParameterString,
                       QgsProcessingParameterVectorDestination)

from .runner import run_tessera
from .styling import LOAD_STYLE, label_classes, write_vector_style

PRECISIONS = ["fp32", "bf16"]


def layer_file(algorithm, parameters, name, context):
    """The file behind a raster layer parameter (a layer of the project or a path)."""
    layer = algorithm.parameterAsRasterLayer(parameters, name, context)
    if layer is None:
        raise QgsProcessingException(f"{name}: not a raster layer or file")
    path = layer.source().split("|")[0]
    if not os.path.isfile(path):
        raise QgsProcessingException(f"{name}: {path} is not a file Tessera can read (a GDAL raster file)")
    return path


class SegmentRaster(QgsProcessingAlgorithm):
    """tessera infer: a checkpoint over a raster, tiled; labels (+ probabilities, polygons)."""

    def name(self):
        return "segment_raster"

    def displayName(self):  # noqa: N802
        return "Segment raster"

    def shortHelpString(self):  # noqa: N802
        return ("Runs a Tessera checkpoint over a raster tile by tile (tessera infer). The labels carry the "
                "checkpoint's class names and colours; polygons (optional) are categorised the same way. "
                "Tiling never changes the answer, only memory and time.")

    def createInstance(self):  # noqa: N802
        return SegmentRaster()

    def initAlgorithm(self, config=None):  # noqa: N802
        self.addParameter(QgsProcessingParameterFile("CHECKPOINT", "Checkpoint (tessera train)", extension="pt"))
        self.addParameter(QgsProcessingParameterRasterLayer("INPUT", "Input raster"))
        self.addParameter(QgsProcessingParameterString(
            "TILE", "Tile: inset side in pixels, or auto (the largest that fits the memory budget)", "auto"))
        self.addParameter(QgsProcessingParameterEnum("PRECISION", "Precision", PRECISIONS, defaultValue=0))
        self.addParameter(QgsProcessingParameterBoolean(
            "COG", "Cloud-Optimized GeoTIFFs (with overviews)", defaultValue=False))
        self.addParameter(QgsProcessingParameterNumber("THREADS", "Threads (0: all cores)", defaultValue=0, minValue=0))
        self.addParameter(QgsProcessingParameterRasterDestination("OUTPUT", "Labels"))
        self.addParameter(QgsProcessingParameterRasterDestination(
            "PROBABILITIES", "Probabilities (a band per class)", optional=True, createByDefault=False))
        self.addParameter(QgsProcessingParameterVectorDestination(
            "VECTORS", "Polygons", QgsProcessing.TypeVectorPolygon, optional=True, createByDefault=False))

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802
        labels = self.parameterAsOutputLayer(parameters, "OUTPUT", context)
        probabilities = self.parameterAsOutputLayer(parameters, "PROBABILITIES", context)
        vectors = self.parameterAsOutputLayer(parameters, "VECTORS", context)
        args = ["infer", "--checkpoint", self.parameterAsFile(parameters, "CHECKPOINT", context),
                "--input", layer_file(self, parameters, "INPUT", context), "--output", labels,
                "--tile", self.parameterAsString(parameters, "TILE", context) or "auto",
                "--precision", PRECISIONS[self.parameterAsEnum(parameters, "PRECISION", context)],
                "--threads", self.parameterAsInt(parameters, "THREADS", context)]
        if self.parameterAsBoolean(parameters, "COG", context):
            args.append("--cog")
        if probabilities:
            args += ["--probabilities", probabilities]
        if vectors:
            args += ["--vectorize", vectors]
        outputs = [p for p in (labels, probabilities, vectors) if p]
        run_tessera(args, feedback, [os.path.dirname(os.path.abspath(p)) for p in outputs])
        if vectors:
            write_vector_style(vectors, label_classes(labels))
        for name, path in (("OUTPUT", labels), ("VECTORS", vectors)):
            if path and context.willLoadLayerOnCompletion(path):
                context.layerToLoadOnCompletionDetails(path).setPostProcessor(LOAD_STYLE)
        return {"OUTPUT": labels, "PROBABILITIES": probabilities or None, "VECTORS": vectors or None}


class EvaluateSegmentation(QgsProcessingAlgorithm):
    """tessera eval: per-class Dice, IoU, precision and recall of labels against the truth."""

    def name(self):
        return "evaluate_segmentation"

    def displayName(self):  # noqa: N802
        return "Evaluate segmentation"

    def shortHelpString(self):  # noqa: N802
        return ("Per-class Dice, IoU, precision and recall of a label raster against the true labels "
                "(tessera eval), optionally on a held-back fraction only; written as JSON.")

    def createInstance(self):  # noqa: N802
        return EvaluateSegmentation()

    def initAlgorithm(self, config=None):  # noqa: N802
        self.addParameter(QgsProcessingParameterRasterLayer("PREDICTION", "Predicted labels"))
        self.addParameter(QgsProcessingParameterRasterLayer("TRUTH", "True labels"))
        self.addParameter(QgsProcessingParameterNumber(
            "HOLDOUT_FRACTION", "Held-back fraction scored (0: all)", QgsProcessingParameterNumber.Double,
            defaultValue=0.0, minValue=0.0, maxValue=1.0))
        self.addParameter(QgsProcessingParameterString("NAMES", "Class names, comma separated", optional=True))
        self.addParameter(QgsProcessingParameterFileDestination("OUTPUT", "Scores (JSON)", "JSON files (*.json)"))
        self.addOutput(QgsProcessingOutputString("SUMMARY", "Mean Dice and IoU"))

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802
        args = ["eval", "--json", "--pred", layer_file(self, parameters, "PREDICTION", context),
                "--truth", layer_file(self, parameters, "TRUTH", context)]
        fraction = self.parameterAsDouble(parameters, "HOLDOUT_FRACTION", context)
        if fraction > 0:
            args += ["--holdout-fraction", fraction]
        names = self.parameterAsString(parameters, "NAMES", context)
        if names:
            args += ["--names", names]
        output = self.parameterAsFileOutput(parameters, "OUTPUT", context)
        text = run_tessera(args, feedback, [])
        try:
            scores = json.loads(text)
        except ValueError as e:
            raise QgsProcessingException(f"tessera eval printed no JSON: {e}") from e
        temporary = f"{output}.partial-{os.getpid()}"
        with open(temporary, "w") as f:
            json.dump(scores, f, indent=2)
        os.replace(temporary, output)
        summary = ", ".join(f"{k} {v:.4f}" for k, v in scores.items() if k.startswith("mean") and isinstance(v, float))
        feedback.pushInfo(summary)
        return {"OUTPUT": output, "SUMMARY": summary}
