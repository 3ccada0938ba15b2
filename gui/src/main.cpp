// tessera-view [IMAGE] [--labels LABELS] [--run RUN_DIR] [--screenshot PNG [--size WxH]]
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>

#include <cstdio>

#include "main_window.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("tessera-view");
  QCommandLineParser cli;
  cli.setApplicationDescription("Tessera viewer: huge rasters, CT volumes, label overlays and per-device telemetry.");
  cli.addHelpOption();
  cli.addPositionalArgument("IMAGE", "GeoTIFF / VRT / COG, NIfTI, NRRD, MHA or a DICOM folder");
  QCommandLineOption labels("labels", "Label raster or label volume shown as overlay.", "LABELS");
  QCommandLineOption run("run", "Run directory (infer or train): its tiles as they finish, metrics, checkpoints, telemetry.", "RUN_DIR");
  QCommandLineOption shot("screenshot", "Render offscreen when loaded, save the window as PNG, exit.", "PNG");
  QCommandLineOption view_only("view-only", "With --screenshot: save only the image view, not the window.");
  QCommandLineOption size("size", "Window size for --screenshot, e.g. 1280x860.", "WxH", "1280x860");
  QCommandLineOption outline("outline", "Start in outline mode.");
  QCommandLineOption colors("colors", "Label names/colours: ITK-SNAP label file or 3D Slicer colour table.", "FILE");
  QCommandLineOption devices_height("devices-height", "Height of the devices dock in pixels.", "PX");
  QCommandLineOption bands("bands", "1-based bands to show: one (grey) or three (R,G,B), e.g. 4,3,2.", "LIST");
  QCommandLineOption opacity("opacity", "Overlay opacity 0..1 (default 0.5).", "ALPHA");
  cli.addOptions({labels, run, shot, view_only, size, outline, opacity, colors, devices_height, bands});
  cli.process(app);

  tessera::gui::MainWindow window;
  const QStringList wh = cli.value(size).split('x');
  if (wh.size() == 2) window.resize(wh[0].toInt(), wh[1].toInt());
  if (cli.isSet(outline)) window.legend()->setOutline(true);
  if (cli.isSet(opacity)) window.legend()->setOpacity(cli.value(opacity).toDouble());
  window.show();
  if (cli.isSet(devices_height)) window.setDevicesHeight(cli.value(devices_height).toInt());
  if (cli.isSet(colors)) window.loadLabelTable(cli.value(colors));
  if (cli.isSet(bands)) {
    std::vector<int> b;
    for (const QString& part : cli.value(bands).split(',', Qt::SkipEmptyParts)) b.push_back(part.toInt());
    window.setBands(b);
  }
  if (!cli.positionalArguments().isEmpty()) window.openImage(cli.positionalArguments().front(), cli.value(labels));
  if (cli.isSet(run)) window.openRun(cli.value(run));

  if (cli.isSet(shot)) {
    const QString png = cli.value(shot);
    const bool only_view = cli.isSet(view_only);
    auto save = [&window, png, only_view] {
      const QImage img = only_view ? window.centralWidget()->grab().toImage() : window.grab().toImage();
      const bool ok = img.save(png, "PNG");
      std::fprintf(ok ? stdout : stderr, "%s %s\n", ok ? "saved" : "cannot write", qPrintable(png));
      QApplication::exit(ok ? 0 : 1);
    };
    // Poll until the view is complete (tiles loaded) and the devices panel has read once.
    auto* poll = new QTimer(&window);
    int waited = 0;
    QObject::connect(poll, &QTimer::timeout, &window, [&window, save, &waited, poll] {
      waited += 100;
      // Done when the view is complete, or when nothing is loading any more (e.g. the file
      // could not be opened: the message in the status bar is what the shot shows).
      const bool settled = window.viewReady() || (!window.isBusy() && !window.rasterView()->hasImage());
      if ((settled || waited > 60000) && waited >= 1500) {
        poll->stop();
        window.rasterView()->update();
        QTimer::singleShot(200, &window, save);
      }
    });
    poll->start(100);
  }
  return app.exec();
}
