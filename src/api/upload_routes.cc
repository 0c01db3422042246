// The routes by which a job's JobSpec and code arrive: POST /api/v1/jobs (multipart: the
// JobSpec and a code zip, a capsule, or the digest of a capsule stored before), POST
// /api/v1/uploads then PUT /api/v1/uploads/{id} (the capsule as a plain body), and GET
// /api/v1/capsules/{sha256}. Whatever the form, the code is streamed to the state directory,
// checked, made durable, and the job row created for the controller.
#include "starforge/api/handlers.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "starforge/api/body.h"
#include "starforge/api/convert.h"
#include "starforge/capsule/accept.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/extract.h"
#include "starforge/capsule/stream_check.h"
#include "starforge/common/api_errors.h"
#include "starforge/common/format.h"
#include "starforge/common/reasons.h"
#include "starforge/common/yaml_json.h"
#include "starforge/jobspec/parse.h"

namespace starforge::api {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxSpecBytes = 1 << 20;
constexpr int kMaxParts = 8;
// How many of a user's newest jobs a capsule digest is looked up in (GET /api/v1/capsules/…).
constexpr int kCapsuleLookback = 1000;

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const auto& i : items)
    s += (s.empty() ? "" : sep) + i;
  return s;
}

// Removes a file or directory tree at scope exit unless released.
class Cleanup {
 public:
  explicit Cleanup(fs::path p = {}) : path_(std::move(p)) {}
  ~Cleanup() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  Cleanup(const Cleanup&) = delete;
  Cleanup& operator=(const Cleanup&) = delete;
  void Reset(fs::path p) { path_ = std::move(p); }
  void Release() { path_.clear(); }

 private:
  fs::path path_;
};

void FsyncPath(const fs::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("open " + p.string() + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error("fsync " + p.string() + ": " + std::strerror(err));
}

// ------------------------------------------------------------------------------------------
// POST /api/v1/jobs

struct Upload {
  std::string spec;
  bool has_spec = false;
  fs::path code;  // the code or capsule part, in a temporary file under uploads/
  int code_fd = -1;
  int64_t code_bytes = 0;     // received
  int64_t code_written = 0;   // written to the file (the rest waits in `pending`)
  int64_t code_synced = 0;    // bytes whose writeback has been started
  std::vector<char> pending;  // received, not yet written: the file is written in big pieces
  // A "capsule" part is checked while it arrives (capsule/stream_check.h).
  std::unique_ptr<capsule::StreamCheck> stream;
  bool has_code = false;
  bool code_is_capsule = false;  // a "capsule" part (built by the client), not a "code" zip
  std::string expect_sha;   // PUT /api/v1/uploads/{id}?sha256=: the capsule's digest must be this
  std::string capsule_ref;  // a "capsuleSha256" part: a capsule the server already has
  bool has_ref = false;
  std::string error;  // a malformed request, found while reading
  bool too_large = false;
  DiskBudget::Reservation space;  // disk space held for this upload and its check

  Upload() = default;
  Upload(const Upload&) = delete;
  Upload& operator=(const Upload&) = delete;
  ~Upload() {
    if (code_fd >= 0) ::close(code_fd);
  }
};

// Our own disk failed (full, I/O error) while storing or checking an upload: the operator's
// problem, never the user's archive. The log has the detail; the answer has no server path.
[[noreturn]] void ServerStorageFailure(const std::string& detail, int err) {
  spdlog::error("storing an upload: {}", detail);
  if (err == ENOSPC || err == EDQUOT) {
    throw ApiError{507, api_errors::kInsufficientStorage,
                   "the server has no space left to store this upload; this is not a problem "
                   "with your code: tell the server's operator (see its log)"};
  }
  throw ApiError{500, api_errors::kInternal,
                 "the server could not store this upload (an I/O error on its side); tell the "
                 "server's operator (see its log)"};
}

// Holds `bytes` of the disk for this request (disk_budget.h), or refuses it: 503 while
// other uploads hold the space, 507 when the disk is too full for it even alone. Either is the
// server's condition, never the user's code.
void ReserveSpace(Call& c, DiskBudget::Reservation& r, int64_t bytes) {
  const DiskBudget::Refusal refusal = c.server.upload_budget->Reserve(r, bytes);
  if (refusal == DiskBudget::Refusal::kNone) return;
  // The rest of the body is not wanted: the connection closes after the answer.
  c.body_read = true;
  c.res.set_header("Connection", "close");
  switch (refusal) {
    case DiskBudget::Refusal::kNone:
      return;
    case DiskBudget::Refusal::kBusy:
      c.res.set_header("Retry-After", "30");
      throw ApiError{503, api_errors::kUnavailable,
                     "the server's free disk space is held by other uploads in progress; retry "
                     "in a little while (this is not a problem with your code)"};
    case DiskBudget::Refusal::kFull:
      c.res.set_header("Retry-After", "300");
      throw ApiError{507, api_errors::kInsufficientStorage,
                     "the server has too little free disk space for an upload of up to " +
                         capsule::FormatBytes(static_cast<uint64_t>(bytes)) +
                         "; this is not a problem with your code: tell the server's operator"};
  }
}

constexpr int64_t kWritebackChunk = 8 << 20;
// httplib hands the body over in pieces of a few KiB: written a MiB at a time instead (a
// 600 MiB capsule in 600 writes, not 150 000).
constexpr size_t kWritePiece = 1 << 20;

// Writes what the code part has in `pending` to its file, tells the stream check and starts
// writing it to disk every kWritebackChunk.
void FlushCode(Upload& up) {
  if (up.pending.empty()) return;
  for (size_t done = 0; done < up.pending.size();) {
    const ssize_t w = ::write(up.code_fd, up.pending.data() + done, up.pending.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      ServerStorageFailure("writing " + up.code.string() + ": " + std::strerror(errno), errno);
    done += static_cast<size_t>(w);
  }
  up.code_written += static_cast<int64_t>(up.pending.size());
  if (up.stream) up.stream->Written(up.pending.size());
  up.pending.clear();
  // Start writing it to disk while the rest arrives and while it is checked: the fsync before
  // the job exists then waits for the tail only (a 600 MiB capsule's fsync alone is seconds on
  // a busy disk). A hint: errors surface at that fsync.
  if (up.code_written - up.code_synced >= kWritebackChunk) {
    ::sync_file_range(up.code_fd, up.code_synced, up.code_written - up.code_synced,
                      SYNC_FILE_RANGE_WRITE);
    up.code_synced = up.code_written;
  }
}

// Creates uploads/<id>.zip for the code (a "code" zip or a capsule, checked as it arrives).
void OpenCode(ServerState& s, Upload& up, Cleanup& tmp, const std::string& id, bool is_capsule) {
  up.has_code = true;
  up.code_is_capsule = is_capsule;
  const std::string path = (s.uploads / (id + ".zip")).string();
  // Read too: by the stream check, behind the writes.
  up.code_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (up.code_fd < 0)
    ServerStorageFailure(
        "cannot create a file in " + s.uploads.string() + ": " + std::strerror(errno), errno);
  up.code = path;
  tmp.Reset(up.code);
  up.pending.reserve(kWritePiece);
  if (up.code_is_capsule) {
    capsule::InspectOptions limits;
    limits.max_total_bytes = static_cast<uint64_t>(s.options.max_upload_bytes);
    up.stream = std::make_unique<capsule::StreamCheck>(up.code_fd, limits);
  }
}

// `n` more bytes of the code: written a MiB at a time; past the limit, counted and dropped
// (the client still gets its answer).
void AppendCode(const ServerState& s, Upload& up, const char* data, size_t n) {
  up.code_bytes += static_cast<int64_t>(n);
  if (up.code_bytes > s.options.max_upload_bytes) {
    up.too_large = true;
    return;
  }
  up.pending.insert(up.pending.end(), data, data + n);
  if (up.pending.size() >= kWritePiece) FlushCode(up);
}

// Streams the multipart body: the JobSpec into memory, the code archive into a temporary
// file (never the whole upload in memory).
// The code part goes straight to its final name, uploads/<id>.zip: created while the body
// arrives, its directory entry is on disk with the file's own fsync, so making it durable
// costs one flush instead of a second one for a rename (a leftover without a job row is
// removed at the next start, CleanUploads).
void ReadUpload(Call& c, Upload& up, Cleanup& tmp, const std::string& id) {
  ServerState& s = c.server;
  if (!c.req.is_multipart_form_data() || !HasBody(c.req)) {
    const bool ok = Drain(c, static_cast<size_t>(s.options.max_upload_bytes + kBodySlack));
    if (!ok) throw TooLarge(c.server.options);
    throw BadRequest(
        "expected a multipart/form-data body with a \"spec\" part (the JobSpec, YAML or JSON) "
        "and a \"code\" part (a zip of the code directory); got Content-Type \"" +
        c.req.get_header_value("Content-Type") + "\"");
  }
  // The upload's bytes are held on the disk before any is written.
  int64_t declared = s.options.max_upload_bytes + kBodySlack;
  if (auto n = ParseCount(c.req.get_header_value("Content-Length")); n && *n < declared)
    declared = *n;
  ReserveSpace(c, up.space, declared);
  c.body_read = true;
  enum class Part { kNone, kSpec, kCode, kRef, kIgnored } current = Part::kNone;
  int parts = 0;
  int64_t total = 0;
  const int64_t limit = s.options.max_upload_bytes + kBodySlack;
  const bool ok = (*c.reader)(
      [&](const httplib::MultipartFormData& part) {
        FlushCode(up);
        current = Part::kIgnored;
        if (++parts > kMaxParts) {
          up.error = "too many parts: send one \"spec\" and one \"code\" (or \"capsule\")";
        } else if (part.name == "spec") {
          if (up.has_spec) up.error = "two \"spec\" parts";
          up.has_spec = true;
          current = Part::kSpec;
        } else if (part.name == "capsuleSha256") {
          if (up.has_ref) up.error = "two \"capsuleSha256\" parts";
          up.has_ref = true;
          current = Part::kRef;
        } else if (part.name == "code" || part.name == "capsule") {
          if (up.has_code) {
            up.error = "two \"code\" or \"capsule\" parts: send one";
          } else {
            current = Part::kCode;
            OpenCode(c.server, up, tmp, id, part.name == "capsule");
          }
        } else if (up.error.empty()) {
          up.error = "unexpected part \"" + part.name +
                     "\": the parts are \"spec\" (the JobSpec) and one of \"code\" (a zip), "
                     "\"capsule\" (a capsule) or \"capsuleSha256\"";
        }
        return true;
      },
      [&](const char* data, size_t n) {
        total += static_cast<int64_t>(n);
        if (total > limit) {  // only a chunked body gets here: a declared length is checked first
          up.too_large = true;
          return false;
        }
        if (current == Part::kSpec) {
          if (up.spec.size() + n > kMaxSpecBytes)
            up.error = "the JobSpec is larger than " + capsule::FormatBytes(kMaxSpecBytes);
          else
            up.spec.append(data, n);
        } else if (current == Part::kRef) {
          if (up.capsule_ref.size() + n > 128)
            up.error = "\"capsuleSha256\" is not a SHA-256";
          else
            up.capsule_ref.append(data, n);
        } else if (current == Part::kCode) {
          AppendCode(c.server, up, data, n);
        }
        return true;
      });
  if (up.too_large || c.res.status == 413) throw TooLarge(c.server.options);
  if (!ok) throw BadRequest("malformed multipart/form-data body");
  FlushCode(up);
  if (!up.error.empty()) throw BadRequest(up.error);
  if (!up.has_spec)
    throw BadRequest(
        "missing the \"spec\" part: send the JobSpec (YAML or JSON) as form field "
        "\"spec\"",
        "spec");
}

jobspec::JobSpec ParseSpec(const ServerState& s, const std::string& text) {
  const StatusOr<nlohmann::json> doc = ParseYaml(text, jobspec::kJobSpecYamlLimits);
  if (!doc.ok()) {
    throw BadRequest("the JobSpec is not valid YAML or JSON: " + doc.status().message(), "spec");
  }
  jobspec::ParseResult parsed = jobspec::FromJson(*doc, config::JobDefaults(s.options.config));
  if (!parsed.ok()) {
    const std::string first = parsed.errors.front().ToString();
    throw ApiError{422, api_errors::kInvalid,
                   parsed.errors.size() == 1
                       ? "invalid JobSpec: " + first
                       : "invalid JobSpec (" + std::to_string(parsed.errors.size()) +
                             " errors): " + first + "; …",
                   parsed.errors.front().path, parsed.errors};
  }
  return *parsed.spec;
}

// Checks the archive as the controller will unpack it (capsule::CheckZip: every entry inflated
// and counted, nothing written), so a refusal costs no disk and an accepted upload is unpacked
// once, by the controller.
void CheckCode(const ServerState& s, Upload& up) {
  auto invalid = [](std::string message, FieldErrors errors = {}) {
    return ApiError{422, api_errors::kInvalid, std::move(message), "code", std::move(errors)};
  };
  if (!up.has_code || up.code_bytes == 0)
    throw invalid("no code: pass --code DIR or set code: in the JobSpec");
  capsule::ExtractLimits limits;
  // The unpacked code is bounded like the capsule that will hold it: a bomb is refused before
  // the controller would unpack it.
  limits.max_total_bytes = static_cast<uint64_t>(s.options.max_upload_bytes);
  capsule::ExtractResult r = capsule::CheckZip(up.code, limits);
  if (r.local_errno != 0) ServerStorageFailure(r.errors.front(), r.local_errno);
  if (!r.ok()) {
    FieldErrors errors;
    for (const auto& e : r.errors)
      errors.push_back({"code", e});
    throw invalid(
        "the code archive was refused: " + r.errors.front() +
            (r.errors.size() > 1 ? " (and " + std::to_string(r.errors.size() - 1) + " more)" : ""),
        errors);
  }
  if (r.files == 0) throw invalid("the code archive holds no files; a capsule needs at least one");
  if (r.reserved)
    throw invalid(
        ".starforge/ in the code archive: that directory is reserved for StarForge's "
        "own files in the capsule; rename it");
}

// A capsule the client built: checked like any upload (capsule/accept.h); its JobSpec and
// runner must be the server's, or a copy with the server's is stored instead.
capsule::AcceptResult CheckCapsule(Call& c, Upload& up, const jobspec::JobSpec& spec) {
  ServerState& s = c.server;
  if (up.code_bytes == 0) throw BadRequest("the capsule is empty", "capsule");
  ReserveSpace(c, up.space, up.code_bytes);  // a copy with the server's JobSpec and runner
  capsule::AcceptOptions accept;
  accept.max_bytes = static_cast<uint64_t>(s.options.max_upload_bytes);
  accept.scratch_dir = s.uploads;
  // Checked as it arrived; an archive the stream check does not read itself (not one
  // `forge submit` writes) is inspected now, from the file.
  std::optional<capsule::InspectResult> streamed;
  if (up.stream) streamed = up.stream->Finish();
  if (!up.expect_sha.empty()) {
    // The digest the client named is that of the bytes it sent, before any rebuild below.
    if (!streamed && up.code_bytes <= s.options.max_upload_bytes) {
      capsule::InspectOptions io;
      io.max_total_bytes = accept.max_bytes;
      streamed = capsule::Inspect(up.code, io);
    }
    if (streamed && streamed->sha256 != up.expect_sha)
      throw ApiError{422, api_errors::kInvalid,
                     "the capsule received has SHA-256 " + streamed->sha256 + ", not the " +
                         up.expect_sha +
                         " the request names (sha256=): it was changed or cut short on the way; "
                         "send it again",
                     "sha256"};
  }
  capsule::AcceptResult r =
      streamed ? capsule::AcceptInspected(up.code, std::move(*streamed), spec, accept)
               : capsule::AcceptCapsule(up.code, spec, accept);
  if (r.local_errno != 0) ServerStorageFailure(r.errors.front(), r.local_errno);
  if (!r.ok()) {
    FieldErrors errors;
    for (const auto& e : r.errors)
      errors.push_back({"capsule", e});
    throw ApiError{
        422, api_errors::kInvalid,
        "the capsule was refused: " + r.errors.front() +
            (r.errors.size() > 1 ? " (and " + std::to_string(r.errors.size() - 1) + " more)" : ""),
        "capsule", std::move(errors)};
  }
  return r;
}

// The newest job of `user` (any user's for an admin) that got as far as its fleet with capsule
// `sha`: the object store has that capsule (it is stored before a job moves to Submitting).
// Not every user's: a digest must not let anyone run someone else's code.
std::optional<store::Job> JobWithCapsule(const Call& c, const std::string& sha,
                                         const std::string* spec_json) {
  const ServerState& s = c.server;
  store::JobFilter filter;
  if (!c.user.admin) filter.owner = c.user.name;
  filter.limit = kCapsuleLookback;
  for (auto& j : s.store.ListJobs(filter)) {
    // Submitting comes right after the capsule is stored; a fleet handle, once it is used.
    const bool stored = j.phase == store::Phase::kSubmitting || !j.fleet_handle.empty();
    if (j.capsule_sha256 == sha && stored && (spec_json == nullptr || j.spec_json == *spec_json))
      return std::move(j);
  }
  return std::nullopt;
}

bool IsSha256(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char ch) {
           return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
         });
}

std::string CheckCapsuleRef(const Call& c, const std::string& ref, const std::string& spec_json) {
  if (!IsSha256(ref))
    throw BadRequest("\"capsuleSha256\" is not a SHA-256 (64 lower-case hex digits)",
                     "capsuleSha256");
  if (!JobWithCapsule(c, ref, &spec_json)) {
    throw ApiError{409, api_errors::kCapsuleNotFound,
                   "no job of yours ran with capsule " + ref +
                       " and this JobSpec (as this server reads it): send the capsule itself",
                   "capsuleSha256"};
  }
  return ref;
}

// `resumeFrom` names earlier jobs of the caller's own, on the same fleet (their directories
// are on that fleet's storage). Another user's job is answered like one that does not exist,
// admins included: a job reads only its owner's checkpoints, and ids cannot be probed.
void CheckResumeFrom(const Call& c, const jobspec::JobSpec& spec) {
  const ServerState& s = c.server;
  FieldErrors errors;
  for (size_t i = 0; i < spec.resume_from.size(); ++i) {
    const std::string& id = spec.resume_from[i];
    const std::string path = "resumeFrom[" + std::to_string(i) + "]";
    const auto earlier = s.store.GetJob(id);
    if (!earlier || earlier->owner != c.user.name) {
      errors.push_back({path, "no job " + id +
                                  " of yours: a job can resume only from its own "
                                  "owner's earlier jobs (forge list shows yours)"});
    } else if (earlier->fleet != spec.fleet) {
      errors.push_back({path, "job " + id + " ran on fleet " + earlier->fleet +
                                  ", this one asks for fleet " + spec.fleet +
                                  ": a job reads earlier jobs' directories on its own fleet's "
                                  "storage"});
    }
  }
  if (errors.empty()) return;
  throw ApiError{422, api_errors::kInvalid,
                 "invalid JobSpec: " + errors.front().ToString() + (errors.size() > 1 ? "; …" : ""),
                 errors.front().path, errors};
}

// Whether `spec` can run here, for this caller: its fleet is configured, local jobs without a
// sandbox only for admins, resumeFrom names the caller's jobs on that fleet, the fleet admits
// it. Throws the answer otherwise.
void AdmitSpec(const Call& c, const jobspec::JobSpec& spec) {
  const ServerState& s = c.server;
  auto fleet = s.fleets.find(spec.fleet);
  if (fleet == s.fleets.end() || fleet->second == nullptr) {
    std::vector<std::string> kinds;
    for (const auto& [k, f] : s.fleets)
      if (f) kinds.push_back(k);
    throw ApiError{422,
                   reasons::kRejected,
                   "fleet \"" + spec.fleet + "\" is not available on this server; configured: " +
                       (kinds.empty() ? std::string("none") : Join(kinds, ", ")),
                   "fleet",
                   {}};
  }
  if (spec.fleet == "local" && !s.options.local_unsandboxed.empty() && !c.user.admin) {
    throw ApiError{403, api_errors::kForbidden,
                   "this server cannot run local jobs in a sandbox (" +
                       s.options.local_unsandboxed +
                       "), so only admins may submit them: a job would run with the server's "
                       "rights; use `fleet: kuberay`, or ask the operator to install bubblewrap",
                   "fleet"};
  }
  CheckResumeFrom(c, spec);
  fleet::Admission admission = fleet->second->Admit(spec);
  if (!admission.possible)
    throw ApiError{422, reasons::kRejected, admission.message, admission.field, {}};
}

// Creates job `id` from a request read into `up` (POST /api/v1/jobs or PUT
// /api/v1/uploads/{id}): the JobSpec parsed and admitted, the code checked, the archive made
// durable, the row created; answers 201 with the job.
void SubmitUpload(Call& c, Upload& up, Cleanup& tmp, const std::string& id) {
  ServerState& s = c.server;
  if (up.code_fd >= 0)  // the tail too, while the upload is checked
    ::sync_file_range(up.code_fd, up.code_synced, 0, SYNC_FILE_RANGE_WRITE);
  jobspec::JobSpec spec = ParseSpec(c.server, up.spec);
  // Built once: stored as text, and answered as it is (not parsed back from the text: a 1 MiB
  // JobSpec would cost that parse again).
  nlohmann::json canonical = jobspec::ToCanonicalJson(spec);
  const std::string spec_json = canonical.dump() + "\n";  // = jobspec::ToCanonicalText
  // Code comes one of three ways (docs/capsule.md, "Submitting"): a zip the controller packs
  // into a capsule, a capsule the client built (checked here, stored by the controller), or the
  // digest of a capsule this user's earlier job stored (nothing uploaded).
  std::string capsule_sha;
  size_t capsule_files = 0;
  if (up.has_ref) {
    if (up.has_code)
      throw BadRequest("send either \"capsuleSha256\" or the code, not both", "capsuleSha256");
    capsule_sha = CheckCapsuleRef(c, up.capsule_ref, spec_json);
  } else if (up.code_is_capsule) {
    capsule::AcceptResult accepted = CheckCapsule(c, up, spec);
    capsule_sha = accepted.sha256;
    capsule_files = accepted.user_files;
    if (accepted.rebuilt) {  // stored instead of the upload, which goes
      std::error_code ec;
      fs::remove(up.code, ec);
      ::close(up.code_fd);
      up.code_fd = ::open(accepted.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (up.code_fd < 0)
        ServerStorageFailure("opening " + accepted.path.string() + ": " + std::strerror(errno),
                             errno);
      up.code = accepted.path;
      tmp.Reset(up.code);
    }
  } else {
    CheckCode(c.server, up);
  }

  AdmitSpec(c, spec);

  // The archive is durable under its final name before the job row that points to it exists.
  fs::path final_path;
  if (up.has_code) {
    final_path = s.uploads / (id + ".zip");
    if (::fsync(up.code_fd) != 0)
      throw std::runtime_error("fsync " + up.code.string() + ": " + std::strerror(errno));
    if (up.code != final_path) {  // a capsule rebuilt with the server's JobSpec and runner
      fs::rename(up.code, final_path);
      tmp.Reset(final_path);
    }
    FsyncPath(s.uploads, O_RDONLY | O_DIRECTORY);
  }

  store::Job job;
  job.id = id;
  job.owner = c.user.name;
  job.name = spec.name;
  job.fleet = spec.fleet;
  job.spec_json = spec_json;
  job.upload_path = final_path.string();
  job.capsule_sha256 = capsule_sha;  // set: the upload (if any) is this capsule, checked
  store::Job created = s.store.CreateJob(job, "api");
  tmp.Release();  // the controller owns the archive now
  s.controller.Enqueue(id);
  spdlog::info("job {} ({}) submitted by {} to fleet {}{}", id, spec.name, c.user.name, spec.fleet,
               capsule_sha.empty() ? ""
               : up.has_ref
                   ? " with the stored capsule " + capsule_sha
                   : fmt::format(" with its capsule {} ({} files)", capsule_sha, capsule_files));
  c.res.set_header("Location", "/api/v1/jobs/" + id);
  nlohmann::json body = JobJson(created);
  body["spec"] = std::move(canonical);
  SetJson(c.res, 201, body);
}

// ------------------------------------------------------------------------------------------
// POST /api/v1/uploads, then PUT /api/v1/uploads/{id}: a job whose capsule is sent as the
// plain body of a second request (docs/api.md, "Uploading a capsule"). The JobSpec comes first
// and is checked before any code is sent; the capsule then needs no multipart framing, whose
// parsing cost as much CPU as a fifth of the check. A session lives in memory only: it holds a
// JobSpec, no disk, and is gone after kUploadSessionTtl, after its PUT, or with the server.

constexpr auto kUploadSessionTtl = std::chrono::minutes(15);
constexpr size_t kMaxUploadSessionsPerUser = 16;
constexpr size_t kMaxUploadSessions = 1024;

std::string NewUploadId() {
  std::array<unsigned char, 16> buf{};
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1)
    throw std::runtime_error("the system's random number generator failed (OpenSSL RAND_bytes)");
  constexpr char kHex[] = "0123456789abcdef";
  std::string id = "u-";
  for (unsigned char b : buf) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

// The media type of the request's Content-Type, lower-case, without parameters.
std::string MediaType(const httplib::Request& req) {
  std::string type = req.get_header_value("Content-Type");
  type = type.substr(0, type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t'))
    type.pop_back();
  for (char& ch : type)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return type;
}

// The body as the capsule, into uploads/<id>.zip, checked as it arrives like a "capsule" part.
void ReadCapsuleBody(Call& c, Upload& up, Cleanup& tmp, const std::string& id) {
  ServerState& s = c.server;
  if (!HasBody(c.req))
    throw BadRequest("the body must be the capsule (application/zip); there is none", "capsule");
  const int64_t limit = s.options.max_upload_bytes + kBodySlack;
  int64_t declared = limit;  // chunked: the most it may be
  if (auto n = ParseCount(c.req.get_header_value("Content-Length")); n && *n < declared)
    declared = *n;
  ReserveSpace(c, up.space, declared);
  c.body_read = true;
  OpenCode(c.server, up, tmp, id, /*is_capsule=*/true);
  const bool ok = (*c.reader)([&](const char* data, size_t n) {
    AppendCode(c.server, up, data, n);
    return up.code_bytes <= limit;  // a chunked body past the limit is not read to its end
  });
  if (up.too_large || c.res.status == 413) throw TooLarge(c.server.options);
  if (!ok) throw BadRequest("the capsule's upload was cut short", "capsule");
  FlushCode(up);
}

}  // namespace

// GET /api/v1/capsules/{sha256}: whether a resubmit can name this capsule instead of sending it.
void GetCapsule(Call& c) {
  OnlyParams(c, {});
  const std::string sha = c.Path();
  if (!IsSha256(sha)) throw BadRequest("not a SHA-256 (64 lower-case hex digits)", "sha256");
  if (!JobWithCapsule(c, sha, nullptr))
    throw ApiError{404, api_errors::kNotFound,
                   "no job of yours ran with capsule " + sha + ": send the capsule itself"};
  SetJson(c.res, 200, {{"sha256", sha}, {"key", capsule::ObjectKey(sha)}});
}

void CreateJob(Call& c) {
  Upload up;
  Cleanup tmp;
  const std::string id = store::NewJobId();
  ReadUpload(c, up, tmp, id);
  SubmitUpload(c, up, tmp, id);
}

void CreateUpload(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {});
  const std::string type = MediaType(c.req);
  if (type != "application/yaml" && type != "application/json" && type != "text/yaml") {
    Drain(c, kMaxSmallBody);
    throw ApiError{415, api_errors::kUnsupportedMediaType,
                   "the body must be the JobSpec, with Content-Type application/yaml or "
                   "application/json; got \"" +
                       c.req.get_header_value("Content-Type") + "\""};
  }
  c.body_read = true;
  const std::optional<std::string> spec = ReadSmallBody(c.req, c.reader, kMaxSpecBytes);
  if (!spec) {
    c.res.set_header("Connection", "close");
    throw ApiError{413, api_errors::kPayloadTooLarge,
                   "the JobSpec is larger than " + capsule::FormatBytes(kMaxSpecBytes)};
  }
  if (spec->empty()) throw BadRequest("the body must be the JobSpec (YAML or JSON); it is empty");
  // Everything but the code is checked now: a bad JobSpec costs no upload.
  const jobspec::JobSpec parsed = ParseSpec(c.server, *spec);
  AdmitSpec(c, parsed);
  const std::string id = NewUploadId();
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(s.sessions_mu);
    size_t mine = 0;
    for (auto it = s.sessions.begin(); it != s.sessions.end();) {
      if (it->second.expires <= now) {
        it = s.sessions.erase(it);
        continue;
      }
      mine += it->second.owner == c.user.name;
      ++it;
    }
    if (mine >= kMaxUploadSessionsPerUser || s.sessions.size() >= kMaxUploadSessions) {
      c.res.set_header("Retry-After", "60");
      throw ApiError{429, api_errors::kTooManyRequests,
                     "too many uploads started and not sent (at most " +
                         std::to_string(kMaxUploadSessionsPerUser) +
                         " per user, each for 15 minutes): send their capsules or wait"};
    }
    s.sessions[id] = UploadSession{c.user.name, *spec, now + kUploadSessionTtl};
  }
  const std::string url = "/api/v1/uploads/" + id;
  c.res.set_header("Location", url);
  SetJson(
      c.res, 201,
      {{"id", id},
       {"url", url},
       {"expiresAt",
        FormatRfc3339(NowMs() / 1000 +
                      std::chrono::duration_cast<std::chrono::seconds>(kUploadSessionTtl).count())},
       {"spec", jobspec::ToCanonicalJson(parsed)}});
}

void PutUpload(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {"sha256"});
  const std::string session_id = c.Path();
  const std::string expect = Param(c, "sha256");
  if (c.req.has_param("sha256") && !IsSha256(expect))
    throw BadRequest("sha256: not a SHA-256 (64 lower-case hex digits)", "sha256");
  UploadSession session;
  {
    // Taken whatever happens next: one PUT per session (a failed one starts again with POST).
    std::lock_guard<std::mutex> lock(s.sessions_mu);
    auto it = s.sessions.find(session_id);
    const bool found = it != s.sessions.end() && it->second.owner == c.user.name &&
                       it->second.expires > Clock::now();
    if (found) session = std::move(it->second);
    if (it != s.sessions.end() && (found || it->second.expires <= Clock::now()))
      s.sessions.erase(it);
    if (!found)
      throw ApiError{404, api_errors::kNotFound,
                     "no upload " + session_id +
                         " of yours in progress (each is used once, for 15 minutes, and a "
                         "server restart forgets them): start again with POST /api/v1/uploads"};
  }
  if (MediaType(c.req) != "application/zip") {
    Drain(c, kMaxSmallBody);
    throw ApiError{415, api_errors::kUnsupportedMediaType,
                   "the body must be the capsule, with Content-Type application/zip; got \"" +
                       c.req.get_header_value("Content-Type") + "\"",
                   "capsule"};
  }
  Upload up;
  Cleanup tmp;
  up.spec = std::move(session.spec);
  up.has_spec = true;
  up.expect_sha = expect;
  const std::string id = store::NewJobId();
  ReadCapsuleBody(c, up, tmp, id);
  SubmitUpload(c, up, tmp, id);
}

// Leftovers of requests that a crash interrupted: partial uploads, check directories, and
// archives renamed into place whose job row was never written.
void CleanUploads(ServerState& s) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(s.uploads, ec)) {
    const std::string name = entry.path().filename().string();
    bool stale = name.starts_with(".upload-") || name.starts_with(".check-");
    if (!stale && name.ends_with(".zip")) stale = !s.store.GetJob(name.substr(0, name.size() - 4));
    if (stale) {
      spdlog::info("removing an interrupted upload: {}", entry.path().string());
      std::error_code rm;
      fs::remove_all(entry.path(), rm);
    }
  }
}

}  // namespace starforge::api
