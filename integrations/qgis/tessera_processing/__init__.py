"""Tessera's QGIS plugin: a Processing provider (provider.py) whose algorithms run the
`tessera` command as a child process (runner.py) and load its outputs styled (styling.py)."""


def classFactory(iface):  # noqa: N802 (QGIS's name)
    from .plugin import TesseraPlugin
    return TesseraPlugin(iface)
