// Building placement: rows of houses facing the roads, then larger buildings filling the
// blocks. A candidate is kept only when it, its shadow and a gap around them land on free
// ground, so buildings never touch roads, water or each other.
#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "scene_layout.hpp"
#include "scene_parts.hpp"

namespace tessera::sample {
namespace {

constexpr int kRoadSetback = 4;  // px of ground kept between roads/water and anything built
constexpr int kGap = 4;          // px of ground kept between neighbouring buildings
constexpr int kShift = 4;        // sub-pixel bits for OpenCV polygon filling
constexpr float kSubpixel = float(1 << kShift);

struct Footprint {
  cv::Point2f centre;
  cv::Point2f axis;  // unit vector along the long side (the ridge of a gable roof)
  float length = 20.f, depth = 14.f;
  float shadow = 5.f;  // shadow length in px, towards the south-east
  int roof_type = 0, level = 0;
  bool gable = true;
};

std::vector<cv::Point> fixed_point(const std::vector<cv::Point2f>& points, cv::Point2f origin) {
  std::vector<cv::Point> out;
  for (const auto& p : points)
    out.emplace_back(cvRound((p.x - origin.x) * kSubpixel), cvRound((p.y - origin.y) * kSubpixel));
  return out;
}

// Corners of a quad spanning [a0, a1] along the axis and [n0, n1] along the normal.
std::vector<cv::Point2f> quad(const Footprint& f, float a0, float a1, float n0, float n1) {
  const cv::Point2f n(-f.axis.y, f.axis.x);
  return {f.centre + a0 * f.axis + n0 * n, f.centre + a1 * f.axis + n0 * n,
          f.centre + a1 * f.axis + n1 * n, f.centre + a0 * f.axis + n1 * n};
}

class Placer {
 public:
  Placer(cv::Mat& labels, cv::Mat& material, uint64_t seed)
      : labels_(labels), material_(material), seed_(seed) {
    cv::Mat built_up = labels != kVegetation;
    const int k = 2 * kRoadSetback + 1;
    cv::dilate(built_up, forbidden_,
               cv::getStructuringElement(cv::MORPH_ELLIPSE, cv::Size(k, k)));
    occupied_ = cv::Mat::zeros(labels.size(), CV_8U);
  }

  /// Urban density in [0, 1]: low in parks, high downtown; smooth over ~400 px.
  float density(cv::Point2f p) const {
    return smoothstep(0.25f, 0.55f, fbm(p.x, p.y, 700.0, 2, mix_seed(seed_, 11)));
  }

  bool try_place(const Footprint& f) {
    const float hl = 0.5f * f.length, hd = 0.5f * f.depth;
    const std::vector<cv::Point2f> body = quad(f, -hl, hl, -hd, hd);
    std::vector<cv::Point2f> with_shadow = body;
    for (const auto& p : body) with_shadow.push_back(p + cv::Point2f(0.7f, 1.0f) * f.shadow);
    std::vector<cv::Point2f> hull;
    cv::convexHull(with_shadow, hull);

    cv::Rect box = cv::boundingRect(hull);
    box.x -= kGap + 1; box.y -= kGap + 1; box.width += 2 * kGap + 3; box.height += 2 * kGap + 3;
    if ((box & cv::Rect(0, 0, labels_.cols, labels_.rows)) != box) return false;
    const cv::Point2f origin(float(box.x), float(box.y));
    const std::vector<cv::Point> hull_px = fixed_point(hull, origin);

    cv::Mat area = cv::Mat::zeros(box.size(), CV_8U);
    cv::fillConvexPoly(area, hull_px, 255, cv::LINE_8, kShift);
    cv::Mat padded = area.clone();
    cv::polylines(padded, std::vector<std::vector<cv::Point>>{hull_px}, true, 255,
                  2 * kGap + 1, cv::LINE_8, kShift);
    for (int y = 0; y < box.height; ++y) {
      const uint8_t* m = padded.ptr<uint8_t>(y);
      const uint8_t* fb = forbidden_.ptr<uint8_t>(box.y + y) + box.x;
      const uint8_t* oc = occupied_.ptr<uint8_t>(box.y + y) + box.x;
      for (int x = 0; x < box.width; ++x)
        if (m[x] && (fb[x] || oc[x])) return false;
    }

    cv::Mat occupied = occupied_(box);
    cv::bitwise_or(occupied, area, occupied);
    material_(box).setTo(kShadow, area);  // the body is painted over next
    draw_roof(f, origin, box);
    return true;
  }

 private:
  void draw_roof(const Footprint& f, cv::Point2f origin, const cv::Rect& box) {
    const float hl = 0.5f * f.length, hd = 0.5f * f.depth;
    cv::Mat labels = labels_(box), material = material_(box);
    cv::fillConvexPoly(labels, fixed_point(quad(f, -hl, hl, -hd, hd), origin), kBuilding,
                       cv::LINE_8, kShift);
    if (f.gable) {
      // The half whose normal faces the sun (north-west, i.e. -x -y) is the bright one.
      const cv::Point2f n(-f.axis.y, f.axis.x);
      const int lit_side = (n.x + n.y) < 0 ? 1 : 0;
      for (int side = 0; side < 2; ++side) {
        const auto half = side == 1 ? quad(f, -hl, hl, 0.f, hd) : quad(f, -hl, hl, -hd, 0.f);
        const uint8_t m = encode_roof(f.roof_type, f.level, side == lit_side ? 0 : 1);
        cv::fillConvexPoly(material, fixed_point(half, origin), m, cv::LINE_8, kShift);
      }
    } else {
      cv::fillConvexPoly(material, fixed_point(quad(f, -hl, hl, -hd, hd), origin),
                         encode_roof(f.roof_type, f.level, 0), cv::LINE_8, kShift);
      if (f.length * f.depth > 900.f) {  // a rooftop plant room on large flat roofs
        const auto unit = quad(f, -0.15f * hl, 0.25f * hl, -0.3f * hd, 0.1f * hd);
        cv::fillConvexPoly(material, fixed_point(unit, origin),
                           encode_roof(f.roof_type, f.level, 1), cv::LINE_8, kShift);
      }
    }
  }

  cv::Mat& labels_;
  cv::Mat& material_;
  uint64_t seed_;
  cv::Mat forbidden_;
  cv::Mat occupied_;
};

// Houses: mostly pitched tile roofs. Types: 0 red tile, 1 brown tile, 2 slate, 3 concrete, 4 white.
void choose_house_roof(Footprint& f, Rng& rng) {
  const double r = rng.uniform();
  f.roof_type = r < 0.45 ? 0 : r < 0.65 ? 1 : r < 0.85 ? 2 : r < 0.95 ? 3 : 4;
  f.gable = f.roof_type <= 2 && rng.chance(0.85);
  f.level = rng.uniform_int(0, kRoofLevels - 1);
  f.shadow = float(rng.uniform(3.0, 7.0));
}

void choose_block_roof(Footprint& f, Rng& rng) {
  if (f.length * f.depth < 1200.f) return choose_house_roof(f, rng);
  const double r = rng.uniform();
  f.roof_type = r < 0.25 ? 2 : r < 0.6 ? 3 : 4;
  f.gable = false;
  f.level = rng.uniform_int(0, kRoofLevels - 1);
  f.shadow = float(rng.uniform(5.0, 9.0));
}

void place_along_road(const RoadPath& road, Placer& placer, Rng& rng) {
  for (int side = -1; side <= 1; side += 2) {
    double s = 0.0, next = rng.uniform(0.0, 20.0);
    for (size_t i = 1; i < road.points.size(); ++i) {
      const cv::Point2f a = road.points[i - 1], b = road.points[i];
      const float length = float(std::hypot(b.x - a.x, b.y - a.y));
      const cv::Point2f t = (b - a) * (1.f / length);
      const cv::Point2f n(-t.y, t.x);
      for (; next < s + length; ) {
        const cv::Point2f p = a + t * float(next - s);
        if (!rng.chance(0.45 + 0.55 * placer.density(p))) { next += 30.0; continue; }
        Footprint f;
        f.length = float(rng.uniform(14.0, 40.0));
        f.depth = float(rng.uniform(12.0, 28.0));
        f.axis = t;
        choose_house_roof(f, rng);
        // Front gardens of varying depth; step back further when the first spot is taken.
        const float base = 0.5f * road.width + kRoadSetback + kGap + 1.f + float(rng.uniform(0.0, 5.0));
        bool placed = false;
        for (float extra : {0.f, 4.f, 9.f}) {
          f.centre = p + float(side) * (base + extra + 0.5f * f.depth) * n + 0.5f * f.length * t;
          if ((placed = placer.try_place(f))) break;
        }
        next += placed ? f.length + rng.uniform(5.0, 14.0) : 5.0;
      }
      s += length;
    }
  }
}

}  // namespace

void place_buildings(const std::vector<RoadPath>& roads, uint64_t seed, Rng& rng,
                     cv::Mat& labels, cv::Mat& material) {
  Placer placer(labels, material, seed);
  for (const RoadPath& road : roads) place_along_road(road, placer, rng);

  const int size = labels.cols;
  const long attempts = long(size) * size / 500;
  for (long i = 0; i < attempts; ++i) {
    Footprint f;
    f.centre = cv::Point2f(float(rng.uniform(0.0, size)), float(rng.uniform(0.0, size)));
    f.length = float(rng.uniform(20.0, 60.0));
    f.depth = float(rng.uniform(16.0, std::min(50.0, double(f.length))));
    double angle = rng.uniform(-0.08, 0.08) + (rng.chance(0.5) ? 0.0 : 1.5707963267948966);
    if (rng.chance(0.15)) angle = rng.uniform(0.0, 3.141592653589793);
    f.axis = cv::Point2f(float(std::cos(angle)), float(std::sin(angle)));
    choose_block_roof(f, rng);
    if (rng.chance(0.3 + 0.7 * placer.density(f.centre))) placer.try_place(f);
  }
}

}  // namespace tessera::sample
