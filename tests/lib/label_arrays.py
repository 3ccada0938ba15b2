"""Label arrays of Tessera's outputs for the CLI tests: a GeoTIFF through GDAL, an uncompressed
NIfTI-1 .nii from its own header (uint8 voxels, indexed (k, j, i))."""
import struct

import numpy as np


def labels(path):
    if path.endswith(".nii"):
        raw = open(path, "rb").read()
        dims = struct.unpack_from("<8h", raw, 40)
        offset = int(struct.unpack_from("<f", raw, 108)[0])
        return np.frombuffer(raw, np.uint8, int(np.prod(dims[1:1 + dims[0]])), offset).reshape(dims[dims[0]:0:-1])
    from osgeo import gdal
    return gdal.Open(path).ReadAsArray()
