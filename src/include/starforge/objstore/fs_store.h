// ObjectStore on a local (or shared) filesystem: the embedded default when no S3 endpoint is
// configured. Objects are plain files under `<root>/<key>`.
#pragma once

#include <memory>
#include <string>

#include "starforge/objstore/object_store.h"

namespace starforge::objstore {

// A store rooted at `root` (created on the first Put). Writes are atomic: a temporary file in
// the target's directory, renamed into place, so readers never see a partial object. Its
// "presigned" URL is `file://<absolute path>`, which Ray opens as a plain path on each node.
std::unique_ptr<ObjectStore> OpenFilesystem(const std::string& root);

}  // namespace starforge::objstore
