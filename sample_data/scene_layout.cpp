#include "scene_layout.hpp"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "scene_parts.hpp"
#include "tessera/core/error.hpp"

namespace tessera::sample {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// A long road across the image, along y when `vertical`, gently curved and tilted.
RoadPath wavy_road(int size, bool vertical, double position, Rng& rng) {
  RoadPath road;
  road.width = rng.chance(0.3) ? rng.uniform_int(11, 14) : rng.uniform_int(7, 10);
  const double amplitude = rng.chance(0.5) ? rng.uniform(6.0, 30.0) : 0.0;
  const double wavelength = rng.uniform(1200.0, 3000.0);
  const double phase = rng.uniform(0.0, kTwoPi);
  const double tilt = rng.uniform(-0.05, 0.05);
  double from = -32.0, to = size + 32.0;
  if (rng.chance(0.25)) {  // a dead end: the road stops somewhere inside the image
    const double stop = rng.uniform(0.3, 0.8) * size;
    if (rng.chance(0.5)) to = stop; else from = stop;
  }
  for (double t = from; t <= to; t += 8.0) {
    const double off = position + tilt * (t - 0.5 * size) +
                       amplitude * std::sin(kTwoPi * t / wavelength + phase);
    road.points.emplace_back(vertical ? cv::Point2f(float(off), float(t))
                                      : cv::Point2f(float(t), float(off)));
  }
  return road;
}

RoadPath diagonal_road(int size, Rng& rng) {
  RoadPath road;
  road.width = rng.uniform_int(10, 14);
  double angle = rng.uniform(25.0, 65.0) * kTwoPi / 360.0;
  if (rng.chance(0.5)) angle = kTwoPi / 2 - angle;
  const double cx = rng.uniform(0.2, 0.8) * size, cy = rng.uniform(0.2, 0.8) * size;
  const double dx = std::cos(angle), dy = std::sin(angle);
  const double bend = rng.uniform(-20.0, 20.0), half = 1.5 * size;
  for (double s = -half; s <= half; s += 8.0) {
    const double off = bend * std::sin(kTwoPi * (s + half) / (2 * half));
    road.points.emplace_back(float(cx + s * dx - off * dy), float(cy + s * dy + off * dx));
  }
  return road;
}

std::vector<cv::Point> to_pixels(const std::vector<cv::Point2f>& points) {
  std::vector<cv::Point> out;
  out.reserve(points.size());
  for (const auto& p : points) out.emplace_back(cvRound(p.x), cvRound(p.y));
  return out;
}

// Dashed centre line, 12 px paint every 24 px, on roads wide enough to carry one.
void draw_marking(const RoadPath& road, cv::Mat& material) {
  double s = 0.0;
  for (size_t i = 1; i < road.points.size(); ++i) {
    const cv::Point2f a = road.points[i - 1], b = road.points[i];
    const double length = std::hypot(b.x - a.x, b.y - a.y);
    for (double t = 0.0; t < length; t += 1.0, s += 1.0) {
      if (std::fmod(s, 24.0) >= 12.0) continue;
      const float f = float(t / length);
      const cv::Point p(cvRound(a.x + f * (b.x - a.x)), cvRound(a.y + f * (b.y - a.y)));
      if (p.x >= 0 && p.y >= 0 && p.x < material.cols && p.y < material.rows)
        material.at<uint8_t>(p) = kMarking;
    }
  }
}

}  // namespace

void SceneOptions::validate() const {
  if (size < 256 || size > 32768)
    throw Error("--size: " + std::to_string(size) + " is outside [256, 32768] pixels");
}

const std::vector<std::string>& scene_class_names() {
  static const std::vector<std::string> names{"vegetation", "building", "road", "water"};
  return names;
}

std::vector<RoadPath> make_roads(int size, Rng& rng) {
  std::vector<RoadPath> roads;
  for (int axis = 0; axis < 2; ++axis) {
    for (double p = rng.uniform(40.0, 140.0); p < size - 20; p += rng.uniform(160.0, 240.0))
      roads.push_back(wavy_road(size, axis == 0, p, rng));
  }
  const int diagonals = rng.uniform_int(2, 3) * std::max(1, size / 2048);
  for (int i = 0; i < diagonals; ++i) roads.push_back(diagonal_road(size, rng));
  return roads;
}

void make_water(int size, Rng& rng, cv::Mat& river, cv::Mat& lakes) {
  river = cv::Mat::zeros(size, size, CV_8U);
  lakes = cv::Mat::zeros(size, size, CV_8U);
  // Water keeps its size from 2048 px up and shrinks below, so small scenes are not all lake.
  const double shrink = std::min(1.0, size / 2048.0);
  const int rivers = std::max(1, (size + 1024) / 2048);
  for (int r = 0; r < rivers; ++r) {
    const double band = double(size) / rivers;
    const double yc = (r + rng.uniform(0.3, 0.7)) * band;
    const double a1 = rng.uniform(60.0, 140.0), l1 = rng.uniform(700.0, 1300.0);
    const double a2 = rng.uniform(15.0, 40.0), l2 = rng.uniform(220.0, 420.0);
    const double w0 = shrink * rng.uniform(50.0, 75.0), l3 = rng.uniform(300.0, 600.0);
    const double p1 = rng.uniform(0.0, kTwoPi), p2 = rng.uniform(0.0, kTwoPi),
                 p3 = rng.uniform(0.0, kTwoPi);
    for (double x = -40.0; x <= size + 40.0; x += 2.0) {
      const double y = yc + a1 * std::sin(kTwoPi * x / l1 + p1) + a2 * std::sin(kTwoPi * x / l2 + p2);
      const double w = w0 * (1.0 + 0.2 * std::sin(kTwoPi * x / l3 + p3));
      cv::circle(river, cv::Point(cvRound(x), cvRound(y)), cvRound(w / 2), 255, cv::FILLED);
    }
  }
  const double area = double(size) * size / (2048.0 * 2048.0);
  const int count = 1 + std::max(1, int(std::lround(2.5 * area)));
  // The first lakes sit in the held-back right quarter (one per 4096² of scene); the others
  // anywhere.
  const int held_back = std::max(1, int(std::lround(area / 4.0)));
  for (int i = 0; i < count; ++i) {
    const double cx = (i < held_back ? rng.uniform(0.82, 0.9) : rng.uniform(0.1, 0.9)) * size;
    const double cy = rng.uniform(0.15, 0.85) * size;
    const double radius = shrink * rng.uniform(130.0, 190.0);
    const int half = int(2 * radius);
    cv::Mat blob = cv::Mat::zeros(2 * half, 2 * half, CV_8U);
    for (int e = 0; e < 5; ++e) {
      const cv::Point c(half + cvRound(rng.normal(0.0, 0.35 * radius)),
                        half + cvRound(rng.normal(0.0, 0.35 * radius)));
      const cv::Size axes(cvRound(rng.uniform(0.4, 0.8) * radius),
                          cvRound(rng.uniform(0.4, 0.8) * radius));
      cv::ellipse(blob, c, axes, rng.uniform(0.0, 180.0), 0, 360, 255, cv::FILLED);
    }
    const int k = 2 * int(0.3 * radius) + 1;
    cv::GaussianBlur(blob, blob, cv::Size(k, k), 0.0);  // 8-bit blur is bit-exact in OpenCV
    cv::threshold(blob, blob, 100, 255, cv::THRESH_BINARY);
    const cv::Rect box(cvRound(cx) - half, cvRound(cy) - half, 2 * half, 2 * half);
    const cv::Rect inside = box & cv::Rect(0, 0, size, size);
    cv::Mat target = lakes(inside);
    cv::bitwise_or(target, blob(inside - box.tl()), target);
  }
}

SceneLayout make_scene_layout(const SceneOptions& options) {
  options.validate();
  const int size = options.size;
  Rng rng(mix_seed(options.seed, 1));
  SceneLayout layout;
  layout.size = size;
  layout.labels.assign(size_t(size) * size, kVegetation);
  layout.material.assign(size_t(size) * size, kGround);
  cv::Mat labels(size, size, CV_8U, layout.labels.data());
  cv::Mat material(size, size, CV_8U, layout.material.data());

  cv::Mat river, lakes;
  make_water(size, rng, river, lakes);
  labels.setTo(kWater, river);
  material.setTo(kOpenWater, river);

  const std::vector<RoadPath> roads = make_roads(size, rng);
  for (const RoadPath& road : roads) {  // roads cross the river on bridges
    const std::vector<std::vector<cv::Point>> line{to_pixels(road.points)};
    cv::polylines(labels, line, false, kRoad, road.width, cv::LINE_8);
    cv::polylines(material, line, false, kAsphalt, road.width, cv::LINE_8);
  }
  for (const RoadPath& road : roads)
    if (road.width >= 10) draw_marking(road, material);

  labels.setTo(kWater, lakes);  // ... but end at a lake shore
  material.setTo(kOpenWater, lakes);
  river.release();
  lakes.release();

  place_buildings(roads, options.seed, rng, labels, material);
  return layout;
}

}  // namespace tessera::sample
