#pragma once
// An InferJob's exchange with a PACS over DICOMweb (tessera/io/dicomweb.hpp): --input
// dicomweb://…/studies/S/series/X is retrieved (QIDO-RS, WADO-RS) into a temporary folder that
// the run reads as a local DICOM series, and --store dicomweb://… sends the DICOM SEG (STOW-RS)
// once the run's outputs have committed, so a run that fails stores nothing. Internal to engine/.
#include <string>

#include "tessera/engine/infer_options.hpp"

namespace tessera::engine::infer {

class PacsExchange {
 public:
  /// Retrieves a dicomweb:// input (each rank its own copy) and points `o.input` at it, then
  /// asks the --store service once (reachable, credentials accepted). Throws tessera::Error
  /// naming --input or --store.
  explicit PacsExchange(InferOptions& o);
  /// Removes the retrieved series.
  ~PacsExchange();
  PacsExchange(const PacsExchange&) = delete;
  PacsExchange& operator=(const PacsExchange&) = delete;

  /// --store: the committed `o.output` sent by STOW-RS (call on one rank). Throws naming --store.
  void store(const InferOptions& o) const;
  /// `message` naming the dicomweb:// address where it names the temporary folder.
  std::string as_given(std::string message) const;

 private:
  std::string folder_;  ///< the retrieved series, "" for a local input
  std::string address_;  ///< the --input it was retrieved from
};

}  // namespace tessera::engine::infer
