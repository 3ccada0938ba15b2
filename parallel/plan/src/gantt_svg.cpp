// A step's schedule as an SVG Gantt chart: one row per device, a box per event. Sends are
// drawn as a thin bar under the compute boxes of the sending device's row.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::parallel {
namespace {

const char* colour(ScheduleEvent::Kind k) {
  switch (k) {
    case ScheduleEvent::Kind::kForward: return "#4e79a7";
    case ScheduleEvent::Kind::kBackward: return "#f28e2b";
    case ScheduleEvent::Kind::kSend: return "#59a14f";
    case ScheduleEvent::Kind::kAllreduce: return "#e15759";
    case ScheduleEvent::Kind::kRead: return "#9c755f";
    case ScheduleEvent::Kind::kHalo: return "#b07aa1";
    case ScheduleEvent::Kind::kUpdate: return "#76b7b2";
  }
  return "#999999";
}

std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '&') out += "&amp;";
    else out += ch;
  }
  return out;
}

std::string fmt(const char* format, double a, double b, double c, double d) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

}  // namespace

std::string gantt_svg(const std::vector<ScheduleEvent>& events, const std::string& title) {
  constexpr double kLeft = 80, kTop = 40, kRow = 30, kWidth = 900, kBox = 20;
  int devices = 0;
  double end = 0;
  for (const ScheduleEvent& e : events) {
    devices = std::max(devices, e.device + 1);
    end = std::max(end, e.end);
  }
  if (end <= 0) end = 1;
  const double height = kTop + devices * kRow + 50;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(int(kLeft + kWidth + 20)) +
                    "\" height=\"" + std::to_string(int(height)) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<text x=\"" + std::to_string(int(kLeft)) + "\" y=\"20\">" + escape(title) + "</text>\n";
  const double scale = kWidth / end;
  for (int d = 0; d < devices; ++d)
    svg += fmt("<text x=\"4\" y=\"%.1f\">device %.0f</text>\n", kTop + d * kRow + 15, d, 0, 0);
  for (const ScheduleEvent& e : events) {
    const bool send = e.kind == ScheduleEvent::Kind::kSend;
    const double x = kLeft + e.start * scale, w = std::max(0.5, (e.end - e.start) * scale);
    const double y = kTop + e.device * kRow + (send ? kBox : 0), h = send ? 4 : kBox;
    svg += fmt("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"", x, y, w, h);
    svg += std::string(" fill=\"") + colour(e.kind) + "\" stroke=\"white\" stroke-width=\"0.5\"><title>" +
           to_string(e.kind) + (e.micro_batch >= 0 ? " micro-batch " + std::to_string(e.micro_batch) : "") +
           fmt(" %.4g … %.4g s</title></rect>\n", e.start, e.end, 0, 0);
    if (!send && e.micro_batch >= 0 && w > 14)
      svg += fmt("<text x=\"%.2f\" y=\"%.2f\" fill=\"white\" font-size=\"10\">%.0f</text>\n", x + 3, y + 14,
                 e.micro_batch, 0);
  }
  // time axis and legend
  const double axis_y = kTop + devices * kRow + 5;
  svg += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", kLeft, axis_y, kLeft + kWidth,
             axis_y);
  for (int i = 0; i <= 4; ++i) {
    const double t = end * i / 4;
    svg += fmt("<text x=\"%.1f\" y=\"%.1f\">%.3g s</text>\n", kLeft + t * scale - 10, axis_y + 15, t, 0);
  }
  double lx = kLeft;
  for (auto k : {ScheduleEvent::Kind::kRead, ScheduleEvent::Kind::kForward, ScheduleEvent::Kind::kBackward,
                 ScheduleEvent::Kind::kSend, ScheduleEvent::Kind::kAllreduce, ScheduleEvent::Kind::kHalo,
                 ScheduleEvent::Kind::kUpdate}) {
    svg += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\"", lx, axis_y + 25, 0, 0) + " fill=\"" + colour(k) +
           "\"/>";
    svg += fmt("<text x=\"%.1f\" y=\"%.1f\">", lx + 16, axis_y + 36, 0, 0) + to_string(k) + "</text>\n";
    lx += 110;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace tessera::parallel
