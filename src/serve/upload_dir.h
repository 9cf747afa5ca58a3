// The folders POST /reload writes uploads into, cleaned at startup.
//
// An upload is streamed to a temporary ".edgelm-upload-XXXXXX[.ext]" in its folder and renamed
// to its final name only once the model serves (routes_admin.cpp); a server killed mid-upload
// (kill -9, power loss) leaves the temporary behind, possibly gigabytes of half a model. At
// startup, before the listener takes a new upload, remove_stale_uploads() deletes them.
//
// Invariants: only regular files directly in the folder whose name starts with
// ".edgelm-upload-" are removed (never a final name, a folder, a symlink or anything in a
// subfolder); each removal is logged (warn). Two servers sharing an upload folder would delete
// each other's in-progress uploads when one starts: give each server its own folder.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace edgelm::serve {

inline constexpr std::string_view kUploadTempPrefix = ".edgelm-upload-";

// Where uploads go, as routes_admin.cpp chooses: `upload_dir` when set, else the folder of each
// served model (the current directory for a bare file name). Distinct, in the order given.
std::vector<std::string> upload_dirs(const std::string& upload_dir, const std::vector<std::string>& model_paths);

// Deletes the stale upload temporaries in `dir`; returns their paths. A folder that does not
// exist holds nothing to clean (not an error). Errors: the folder cannot be listed, or a
// temporary cannot be removed (the others are still removed).
Result<std::vector<std::string>> remove_stale_uploads(const std::string& dir);

}  // namespace edgelm::serve
