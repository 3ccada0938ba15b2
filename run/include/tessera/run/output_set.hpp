#pragma once
// The outputs of one run, committed together or not at all (labels, probabilities, overlay,
// polygons, STAC item and every side file their writers add). Each output is written into a
// staging folder beside its final place,
//
//   <final folder>/.tessera.partial-<host>-<pid>/<file name>
//
// so that the side files a writer puts next to it (GDAL's .aux.xml, a QGIS .qml, a shapefile's
// .dbf) land there too under their final names. commit() moves every file of every staging
// folder into its final folder; a set destroyed before commit() removes its staging folders,
// and a run killed before it leaves only ".partial" folders, which readers skip
// (RunLayout::is_temporary) and the next set staging into the same folder on the same host
// removes (their process is gone; a rerun never finds a killed run's files). Relative references between outputs of one folder (a STAC item's
// hrefs) are the same staged and committed; writers that record other paths ask final_of().
// Torch-free, MPI-free. Not thread safe.
#include <map>
#include <string>

namespace tessera {

class OutputSet {
 public:
  OutputSet() = default;
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  /// Where to write the output that becomes `final_path` (its staging folder is created);
  /// the same path for the same output. Throws tessera::Error naming the folder it cannot create.
  std::string stage(const std::string& final_path);
  /// Where `final_path`'s file is now: its staged path when this set staged it, else itself.
  std::string locate(const std::string& final_path) const;
  /// The final path of a staged file or a side file in a staging folder; other paths unchanged.
  std::string final_of(const std::string& path) const;
  /// Moves every staged file into its final folder, replacing what was there, or none: a
  /// target nothing can replace (a folder) fails before anything moves, and a move that fails
  /// puts back the files moved and the ones they replaced. Then removes the staging folders.
  /// Throws tessera::Error naming the file (the staged files go with the set).
  void commit();
  /// Removes the staging folders and all in them now (also done by the destructor).
  void discard() noexcept;

 private:
  std::map<std::string, std::string> staged_;   ///< final path -> staged path
  std::map<std::string, std::string> folders_;  ///< staging folder -> final folder
  bool committed_ = false;
};

}  // namespace tessera
