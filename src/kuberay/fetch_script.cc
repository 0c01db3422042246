#include "starforge/kuberay/fetch_script.h"

namespace starforge::kuberay {

// Kept short: it is rendered into every Ray pod's spec. Downloads to DEST.part and renames, so a
// restarted init container never trusts a half-written file; an existing DEST with the right
// digest is reused.
const char* const kFetchCapsuleScript =
    R"PY(import hashlib, os, sys, time, urllib.parse, urllib.request
url, want, dest = sys.argv[2:5]  # argv[0] is "-c", argv[1] names the program in ps
host = urllib.parse.urlsplit(url).hostname
def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
if os.path.exists(dest) and digest(dest) == want:
    print("fetch-capsule: %s already present and verified" % dest)
    sys.exit(0)
part = dest + ".part"
for attempt in range(1, 6):
    try:
        with urllib.request.urlopen(url, timeout=60) as r, open(part, "wb") as f:
            for block in iter(lambda: r.read(1 << 20), b""):
                f.write(block)
        break
    except Exception as e:
        why = "HTTP %s %s" % (e.code, e.reason) if hasattr(e, "code") else str(getattr(e, "reason", type(e).__name__))
        print("fetch-capsule: download from %s failed (attempt %d of 5): %s" % (host, attempt, why), file=sys.stderr)
        if attempt == 5 or getattr(e, "code", 0) in range(400, 500) and e.code not in (408, 429):
            sys.exit(2)  # a client error (expired URL, missing object) will not heal by retrying
        time.sleep(2 * attempt)
got = digest(part)
if got != want:
    os.remove(part)
    print("fetch-capsule: SHA-256 mismatch: expected %s, got %s; the capsule was changed or corrupted in transit" % (want, got), file=sys.stderr)
    sys.exit(3)
os.replace(part, dest)
print("fetch-capsule: %s verified (sha256 %s)" % (dest, want))
)PY";

}  // namespace starforge::kuberay
