#include "tessera/core/geometry.hpp"

#include <algorithm>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera {

int64_t Box::count() const {
  int64_t n = 1;
  for (int64_t s : size) n *= std::max<int64_t>(s, 0);
  return n;
}

Index Box::end() const {
  Index e(origin.size());
  for (size_t i = 0; i < origin.size(); ++i) e[i] = origin[i] + size[i];
  return e;
}

Box Box::clipped(const Index& extent) const {
  TESSERA_CHECK(extent.size() == origin.size());
  Box out{Index(origin.size()), Index(origin.size())};
  for (size_t i = 0; i < origin.size(); ++i) {
    const int64_t lo = std::clamp<int64_t>(origin[i], 0, extent[i]);
    const int64_t hi = std::clamp<int64_t>(origin[i] + size[i], 0, extent[i]);
    out.origin[i] = lo;
    out.size[i] = std::max<int64_t>(hi - lo, 0);
  }
  return out;
}

bool Box::contains(const Box& other) const {
  if (other.origin.size() != origin.size()) return false;
  for (size_t i = 0; i < origin.size(); ++i) {
    if (other.origin[i] < origin[i] || other.origin[i] + other.size[i] > origin[i] + size[i])
      return false;
  }
  return true;
}

std::string to_string(const Index& index) {
  std::ostringstream s;
  s << '(';
  for (size_t i = 0; i < index.size(); ++i) s << (i ? ", " : "") << index[i];
  s << ')';
  return s.str();
}

std::string to_string(const Box& box) {
  return "origin " + to_string(box.origin) + " size " + to_string(box.size);
}

int64_t reflect_index(int64_t i, int64_t n) {
  TESSERA_CHECK(n > 0);
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  int64_t m = i % period;
  if (m < 0) m += period;
  return m < n ? m : period - m;
}

template <class T>
Block<T>::Block(Index shape_) : shape(std::move(shape_)) {
  data.assign(static_cast<size_t>(numel()), T{});
}

template <class T>
int64_t Block<T>::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

template struct Block<float>;
template struct Block<uint8_t>;
template struct Block<uint16_t>;

}  // namespace tessera
