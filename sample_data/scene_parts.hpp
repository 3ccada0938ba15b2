#pragma once
// Private to the scene layout: the pieces scene_layout.cpp assembles. OpenCV stays here.
#include <vector>

#include <opencv2/core.hpp>

#include "random.hpp"

namespace tessera::sample {

/// A road centre line (pixel coordinates, may leave the image) and its width in pixels.
struct RoadPath {
  std::vector<cv::Point2f> points;
  int width = 8;
};

/// A wavy grid of roads with a few dead ends, plus diagonal through-roads.
std::vector<RoadPath> make_roads(int size, Rng& rng);

/// Paints rivers (CV_8U 255) into `river` and smooth lake blobs into `lakes`; at least one lake
/// lies in the right-most quarter so the held-back region has water.
void make_water(int size, Rng& rng, cv::Mat& river, cv::Mat& lakes);

/// Places buildings along the roads and inside the blocks on ground pixels away from roads and
/// water. Writes kBuilding labels, roof materials and kShadow ground south-east of each.
void place_buildings(const std::vector<RoadPath>& roads, uint64_t seed, Rng& rng,
                     cv::Mat& labels, cv::Mat& material);

}  // namespace tessera::sample
