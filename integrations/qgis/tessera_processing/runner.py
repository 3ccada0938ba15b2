"""Runs the `tessera` command for an algorithm: its progress bar relayed to QGIS's feedback,
its errors raised as QgsProcessingException, and a cancel that kills it and removes what it
had staged.

Tessera draws its progress bar on stderr as "LABEL [#####   ] DONE/TOTAL UNIT ..." - every
0.1 s when stderr is a terminal, every 10 s otherwise (core/src/progress.cpp) - so the child's
stderr is a pseudo-terminal here and each redraw ("\\r\\033[K" + the line) is parsed.

Tessera writes every output under a temporary name and renames it when the run commits
(run/output_set.hpp: a staging folder "<folder>/.tessera.partial-<host>-<pid>/";
run/staged_file.hpp: "<file>.partial-<pid>..."): a killed run leaves no output that looks
complete, only those temporaries, which a cancel removes here (they carry the child's pid).
"""
import os
import pty
import re
import selectors
import shutil
import signal
import subprocess

from qgis.core import QgsProcessingException

PROGRESS = re.compile(r"\[[# ]+\] (\d+)/(\d+) ")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def tessera_executable():
    """$TESSERA_EXECUTABLE, else `tessera` on the PATH."""
    path = os.environ.get("TESSERA_EXECUTABLE") or shutil.which("tessera")
    if not path or not os.access(path, os.X_OK):
        raise QgsProcessingException(
            "tessera: the command was not found; put it on the PATH or set TESSERA_EXECUTABLE to its path")
    return path


def remove_staged(folders, pid):
    """The temporaries a killed tessera (process `pid`) left in `folders`."""
    for folder in set(folders):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            staging = name.startswith(".tessera.partial-") and name.endswith(f"-{pid}")
            staged = f".partial-{pid}" in name
            if staging or staged:
                path = os.path.join(folder, name)
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)


def stop(child):
    """SIGTERM to the child's process group, SIGKILL after 5 s."""
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        child.wait()


def run_tessera(args, feedback, output_folders):
    """Runs `tessera ARGS...`; returns its stdout. Raises QgsProcessingException with
    tessera's error line, or "cancelled" after a cancel (the child killed, its temporaries
    in `output_folders` removed)."""
    command = [tessera_executable()] + [str(a) for a in args]
    feedback.pushCommandInfo(" ".join(command))
    master, slave = pty.openpty()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    os.close(slave)
    stdout, stderr = bytearray(), bytearray()
    selector = selectors.DefaultSelector()
    selector.register(master, selectors.EVENT_READ, stderr)
    selector.register(child.stdout, selectors.EVENT_READ, stdout)
    try:
        while selector.get_map():
            if feedback.isCanceled():
                stop(child)
                remove_staged(output_folders, child.pid)
                raise QgsProcessingException("tessera: cancelled; nothing was written")
            for key, _ in selector.select(timeout=0.1):
                try:
                    chunk = os.read(key.fd, 65536)
                except OSError:  # the pty's other end closed
                    chunk = b""
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if key.data is stderr:
                    relay_progress(chunk, feedback)
        child.wait()
    finally:
        selector.close()
        os.close(master)
        if child.poll() is None:
            stop(child)
    text = ANSI.sub("", stderr.decode(errors="replace")).replace("\r", "\n")
    for line in stdout.decode(errors="replace").splitlines():
        feedback.pushInfo(line)
    if child.returncode != 0:
        lines = [l.strip() for l in text.splitlines() if l.strip() and not PROGRESS.search(l)]
        raise QgsProcessingException(lines[-1] if lines else f"tessera exited with status {child.returncode}")
    return stdout.decode(errors="replace")


def relay_progress(chunk, feedback):
    """The last progress bar drawn in `chunk`, as a percentage."""
    found = PROGRESS.findall(ANSI.sub("", chunk.decode(errors="replace")))
    if found:
        done, total = (int(v) for v in found[-1])
        if total > 0:
            feedback.setProgress(100.0 * done / total)
