"""The Processing provider "tessera": Segment raster and Evaluate segmentation."""
from qgis.core import QgsProcessingProvider

from .algorithms import EvaluateSegmentation, SegmentRaster


class TesseraProvider(QgsProcessingProvider):
    def id(self):
        return "tessera"

    def name(self):
        return "Tessera"

    def longName(self):  # noqa: N802
        return "Tessera: U-Net segmentation of large images"

    def loadAlgorithms(self):  # noqa: N802
        self.addAlgorithm(SegmentRaster())
        self.addAlgorithm(EvaluateSegmentation())
