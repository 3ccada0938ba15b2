// The largest connected component of a class with ITK (see tessera/io/components.hpp).
#include "tessera/io/components.hpp"

#include <algorithm>
#include <new>

#include <itkConnectedComponentImageFilter.h>
#include <itkRelabelComponentImageFilter.h>

#include "volume_itk.hpp"

namespace tessera::io {
using detail::Image3;

int64_t keep_largest_component(std::vector<uint8_t>& labels, const Index& extent, uint8_t label, uint8_t background) {
  detail::check_volume_extent(extent);
  TESSERA_CHECK(static_cast<int64_t>(labels.size()) == detail::voxel_count(extent));
  if (std::find(labels.begin(), labels.end(), label) == labels.end()) return 0;
  detail::quiet_itk();
  int64_t removed = 0;
  try {
    auto mask = detail::make_image<uint8_t>(extent, Georeference{});
    uint8_t* m = mask->GetBufferPointer();
    std::transform(labels.begin(), labels.end(), m, [label](uint8_t v) { return uint8_t(v == label); });
    using Components = itk::ConnectedComponentImageFilter<Image3<uint8_t>, Image3<uint32_t>>;
    using Relabel = itk::RelabelComponentImageFilter<Image3<uint32_t>, Image3<uint32_t>>;
    auto components = Components::New();
    components->SetInput(mask);
    components->SetBackgroundValue(0);
    auto relabel = Relabel::New();  // 1 is the largest component
    relabel->SetInput(components->GetOutput());
    relabel->Update();
    const uint32_t* c = relabel->GetOutput()->GetBufferPointer();
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] == label && c[i] != 1) labels[i] = background, ++removed;
  } catch (const itk::ExceptionObject& e) {
    throw Error("largest component of class " + std::to_string(label) + ": " + detail::short_reason(e));
  } catch (const std::bad_alloc&) {
    throw Error("largest component of class " + std::to_string(label) + ": out of memory");
  }
  return removed;
}

LargestComponentSink::LargestComponentSink(std::unique_ptr<LabelSink> inner, Index extent, std::vector<int> keep_largest)
    : inner_(std::move(inner)), extent_(std::move(extent)), keep_largest_(std::move(keep_largest)) {
  TESSERA_CHECK(inner_ != nullptr);
  detail::check_volume_extent(extent_);
  for (int c : keep_largest_) TESSERA_CHECK(c >= 0 && c <= 255);
  labels_.assign(static_cast<size_t>(detail::voxel_count(extent_)), 0);
}

void LargestComponentSink::write(const Box& box, const Block<uint8_t>& labels) {
  TESSERA_CHECK(!committed_);
  detail::paste_labels(labels_, extent_, box, labels);
}

void LargestComponentSink::commit() {
  TESSERA_CHECK(!committed_);
  for (int c : keep_largest_) keep_largest_component(labels_, extent_, static_cast<uint8_t>(c));
  Block<uint8_t> block(Index{1, extent_[0], extent_[1], extent_[2]});
  block.data = std::move(labels_);
  inner_->write(Box{Index{0, 0, 0}, extent_}, block);
  inner_->commit();
  committed_ = true;
}

}  // namespace tessera::io
