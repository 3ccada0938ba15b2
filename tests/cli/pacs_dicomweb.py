"""The PACS side of tests/cli/pacs_dicomweb.sh, spoken with Python's own HTTP client (not
Tessera's libcurl code): wait for the server, upload a folder by STOW-RS, ask QIDO-RS, and
compare the SEG the server holds with a local one.

Usage: pacs_dicomweb.py ROOT USER PASSWORD COMMAND ARGS...
  wait                          until QIDO-RS answers (30 s at most)
  upload FOLDER                 STOW-RS of every .dcm; prints "STUDY SERIES" of the first
  count-seg STUDY               prints how many SEG instances the study holds
  check-seg STUDY SERIES LOCAL  exactly one SEG in STUDY, referencing SERIES, whose frames,
                                segments and positions equal those of the SEG file LOCAL
"""
import base64
import glob
import io
import json
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pydicom

root, user, password, command = sys.argv[1:5]
args = sys.argv[5:]
auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def request(path, accept="application/dicom+json", data=None, content_type=None):
    req = urllib.request.Request(root + path, data=data, headers={"Accept": accept, "Authorization": auth})
    if content_type:
        req.add_header("Content-Type", content_type)
    with urllib.request.urlopen(req, timeout=60) as answer:
        return answer.read(), answer.headers.get("Content-Type", "")


def qido(path):
    body, _ = request(path)
    return json.loads(body) if body else []


def value(item, tag):
    return item[tag]["Value"][0]


def parts(body, content_type):
    boundary = content_type.split("boundary=")[1].split(";")[0].strip('"')
    chunks = body.split(b"--" + boundary.encode())[1:-1]
    return [c.split(b"\r\n\r\n", 1)[1][:-2] for c in chunks]


def seg_instances(study):
    found = []
    for series in qido(f"/studies/{study}/series?Modality=SEG"):
        series_uid = value(series, "0020000E")
        for instance in qido(f"/studies/{study}/series/{series_uid}/instances"):
            found.append((series_uid, value(instance, "00080018")))
    return found


if command == "wait":
    for _ in range(60):
        try:
            qido("/studies")
            sys.exit(0)
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.5)
    sys.exit("the server did not answer QIDO-RS within 30 s")
elif command == "upload":
    files = sorted(glob.glob(args[0] + "/*.dcm"))
    boundary = "test-boundary-7d3a"
    body = b"".join(b"--" + boundary.encode() + b"\r\nContent-Type: application/dicom\r\n\r\n" + open(f, "rb").read()
                    + b"\r\n" for f in files) + b"--" + boundary.encode() + b"--\r\n"
    answer, _ = request("/studies", data=body,
                        content_type=f'multipart/related; type="application/dicom"; boundary={boundary}')
    stored = json.loads(answer).get("00081199", {}).get("Value", [])
    if len(stored) != len(files):
        sys.exit(f"STOW-RS stored {len(stored)} of {len(files)} files")
    first = pydicom.dcmread(files[0], stop_before_pixels=True)
    print(first.StudyInstanceUID, first.SeriesInstanceUID)
elif command == "count-seg":
    print(len(seg_instances(args[0])))
elif command == "check-seg":
    study, source_series, local_path = args
    found = seg_instances(study)
    if len(found) != 1:
        sys.exit(f"QIDO-RS finds {len(found)} SEG instances in study {study}, expected 1")
    seg_series, sop = found[0]
    body, content_type = request(f"/studies/{study}/series/{seg_series}/instances/{sop}",
                                 accept='multipart/related; type="application/dicom"')
    stored = pydicom.dcmread(io.BytesIO(parts(body, content_type)[0]))
    local = pydicom.dcmread(local_path)
    failures = []
    referenced = stored.ReferencedSeriesSequence[0].SeriesInstanceUID
    if referenced != source_series:
        failures.append(f"the SEG references series {referenced}, not the source {source_series}")
    if stored.Modality != "SEG":
        failures.append(f"Modality {stored.Modality}")
    a, b = stored.pixel_array, local.pixel_array
    if a.shape != b.shape or not np.array_equal(a, b):
        failures.append(f"frames differ: stored {a.shape}, local {b.shape}, {int(np.count_nonzero(a != b)) if a.shape == b.shape else '-'} pixels")

    def placed(d):
        return [(int(g.SegmentIdentificationSequence[0].ReferencedSegmentNumber),
                 tuple(round(float(v), 3) for v in g.PlanePositionSequence[0].ImagePositionPatient))
                for g in d.PerFrameFunctionalGroupsSequence]
    if placed(stored) != placed(local):
        failures.append("frames sit on other segments or positions than the local SEG's")
    if [s.SegmentLabel for s in stored.SegmentSequence] != [s.SegmentLabel for s in local.SegmentSequence]:
        failures.append("segment labels differ")
    print(f"SEG {sop}: {a.shape[0]} frames of {len(stored.SegmentSequence)} segments "
          f"({', '.join(s.SegmentLabel for s in stored.SegmentSequence)}), {int(np.count_nonzero(a))} foreground pixels")
    if failures:
        sys.exit("; ".join(failures))
else:
    sys.exit(f"unknown command {command}")
