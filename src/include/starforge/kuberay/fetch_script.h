// The capsule init container's program (Python 3 standard library only, so any training image
// can run it), run as `python3 -c SCRIPT fetch-capsule URL SHA256 DEST`. Exit 0: DEST holds a file
// with that SHA-256. Non-zero: download failed after retries (2) or the digest did not match (3);
// the pod does not start. It never prints the URL: a presigned URL is a bearer credential for its
// object.
#pragma once

namespace starforge::kuberay {

extern const char* const kFetchCapsuleScript;

}  // namespace starforge::kuberay
