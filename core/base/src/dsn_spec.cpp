#include "tessera/core/dsn_spec.hpp"

#include <cmath>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

int64_t power(int64_t base, int exponent) {
  int64_t v = 1;
  for (int i = 0; i < exponent; ++i) v *= base;
  return v;
}

// Parameters of convolutions and norms as the blocks build them (unet_blocks.hpp).
struct Counter {
  const UNetOptions& o;
  int64_t n = 0;
  void conv(int64_t in, int64_t out, int64_t taps) { n += taps * in * out + out; }
  void block(int64_t in, int64_t out) {
    for (int i = 0; i < o.convs_per_level; ++i) {
      conv(i == 0 ? in : out, out, power(o.kernel, o.dims));
      n += (o.norm == Norm::kNone ? 0 : 2) * out;
    }
  }
};

// Filters of level ℓ of a part whose first level has `base`, the deepest level the code's.
int64_t part_filters(const UNetOptions& o, int base, int level) {
  return level == o.levels - 1 ? dsn_code_channels(o) : int64_t{base} << level;
}

}  // namespace

std::string to_string(Similarity s) { return s == Similarity::kDann ? "dann" : "mmd"; }

Similarity parse_similarity(const std::string& s) {
  if (s == "dann") return Similarity::kDann;
  if (s == "mmd") return Similarity::kMmd;
  throw Error("similarity '" + s + "': expected dann or mmd");
}

void DsnOptions::validate(const UNetOptions& unet) const {
  auto bad = [](const std::string& field, const std::string& why) { throw Error("model.dsn." + field + ": " + why); };
  if (domains < 2 || domains > 64) bad("domains", std::to_string(domains) + ": a DSN needs a source and 1 … 63 targets");
  if (private_filters < 1) bad("private_filters", "must be >= 1");
  if (recon_filters < 1) bad("recon_filters", "must be >= 1");
  if (classifier_hidden < 1) bad("classifier_hidden", "must be >= 1");
  for (const auto& [name, w] : {std::pair{"alpha", alpha}, {"beta", beta}, {"gamma", gamma}})
    if (!(w >= 0) || !std::isfinite(w)) bad(name, "must be a finite weight >= 0");
  if (similarity == Similarity::kMmd) {
    if (mmd_sigmas.empty()) bad("mmd_sigmas", "needs at least one bandwidth");
    for (double s : mmd_sigmas)
      if (!(s > 0) || !std::isfinite(s)) bad("mmd_sigmas", "every bandwidth must be > 0");
  }
  if (unet.padding != Padding::kSame)
    throw Error("model.padding: a DSN reconstructs its input, so it needs a `same`-padding U-Net (padding: same)");
  if (unet.norm == Norm::kBatch)
    throw Error("model.norm: batch norm would mix the domains' statistics differently on one and on many ranks; "
                "use group or instance (or none) for a DSN");
}

int64_t dsn_code_channels(const UNetOptions& unet) { return int64_t{unet.base_filters} << (unet.levels - 1); }

int64_t dsn_private_parameter_count(const UNetOptions& unet, const DsnOptions& dsn) {
  Counter c{unet};
  for (int l = 0; l < unet.levels; ++l)
    c.block(l == 0 ? unet.in_channels : part_filters(unet, dsn.private_filters, l - 1),
            part_filters(unet, dsn.private_filters, l));
  return c.n;
}

int64_t dsn_recon_parameter_count(const UNetOptions& unet, const DsnOptions& dsn) {
  Counter c{unet};
  const int64_t up_taps = unet.decoder == Decoder::kTransposed ? power(2, unet.dims) : 1;
  for (int l = unet.levels - 2; l >= 0; --l) {
    c.conv(part_filters(unet, dsn.recon_filters, l + 1), part_filters(unet, dsn.recon_filters, l), up_taps);
    c.block(part_filters(unet, dsn.recon_filters, l), part_filters(unet, dsn.recon_filters, l));
  }
  c.conv(part_filters(unet, dsn.recon_filters, 0), unet.in_channels, 1);
  return c.n;
}

int64_t dsn_classifier_parameter_count(const UNetOptions& unet, const DsnOptions& dsn) {
  const int64_t h = dsn.classifier_hidden;
  int64_t n = 0;
  for (int l = 0; l < unet.levels; ++l) n += (int64_t{unet.base_filters} << l) * h + h + h * dsn.domains + dsn.domains;
  return n;
}

int64_t dsn_pooled_channels(const UNetOptions& unet) {
  int64_t n = 0;
  for (int l = 0; l < unet.levels; ++l) n += int64_t{unet.base_filters} << l;
  return n;
}

}  // namespace tessera
