// POST /reload (admin): swaps the served model without a restart (EngineService::reload).
//
// Auth: `Authorization: Bearer <admin_token>` (constant-time compare); no admin token
// configured: 403 (the endpoint is disabled); no header 401; wrong token 403.
// Body, either:
//  - JSON {"path": "/server/side/model.gguf", "tokenizer"?: "...", "sha256"?: "hex", "name"?: "..."}
//  - multipart/form-data with a file field `model` (streamed to a temporary file in the upload
//    folder, hashing as it goes, never held whole in memory) and optional text fields
//    `sha256`, `tokenizer`, `name`. The upload is kept as NAME-SHA12.EXT in the upload folder
//    and loaded from there (an identical upload kept before is reused); deleted if the reload
//    fails. Uploads are bounded by max_upload_bytes (16 GiB by default), the JSON form
//    by max_body_bytes.
// Replies: 200 {"status":"reloaded","model":name,"load_ms":...}; 400 malformed request or
// sha256 mismatch; 409 another reload runs; 422 the model does not load or fails its
// self-check (the old model keeps serving); 503 not ready or shutting down.
#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "http/multipart.h"
#include "serve/http_server.h"
#include "serve/sha256.h"

namespace edgelm::serve {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const char* kEndpoint = "/reload";

bool check_admin(ServerContext& ctx, const http::Request& req, http::Response& res, const char* endpoint = kEndpoint) {
  const std::string& token = ctx.config().admin_token;
  if (token.empty()) {
    ctx.send_error(res, endpoint,
                   {403, "the admin endpoints are disabled: no admin token is configured", "permission_error", "",
                    "admin_disabled"});
    return false;
  }
  const std::string auth = req.header("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.size() < prefix.size() || auth.compare(0, prefix.size(), prefix) != 0) {
    ctx.send_error(res, endpoint,
                   {401, "missing admin token: send 'Authorization: Bearer <admin token>'", "authentication_error", "",
                    "missing_admin_token"});
    return false;
  }
  if (!constant_time_equal(auth.substr(prefix.size()), token)) {
    ctx.send_error(res, endpoint, {403, "invalid admin token", "permission_error", "", "invalid_admin_token"});
    return false;
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_hex_sha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (const char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The hex SHA-256 of a file; empty if it cannot be read.
std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  Sha256 h;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) h.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return "";
  return h.hex_digest();
}

// Reloads and answers; `uploaded` (if set) is deleted on failure.
void do_reload(ServerContext& ctx, http::Response& res, ReloadOptions ro, const std::string& uploaded) {
  EngineService::Reloaded r = ctx.service().reload(ro);
  if (r.error) {
    if (!uploaded.empty()) std::remove(uploaded.c_str());
    ApiError e;
    switch (r.error->kind) {
      case ReloadErrorKind::busy: e = {409, r.error->message, "conflict_error", "", "reload_in_progress"}; break;
      case ReloadErrorKind::unavailable: e = {503, r.error->message, "server_error", "", "unavailable"}; break;
      case ReloadErrorKind::invalid:
        e = {422, fmt::format("the new model was not loaded (the old one keeps serving): {}", r.error->message),
             "invalid_request_error", "path", "model_load_failed"};
        break;
    }
    return ctx.send_error(res, kEndpoint, e);
  }
  ctx.send_json(res, 200, {{"status", "reloaded"}, {"model", r.info->model_name}, {"load_ms", r.info->load_ms}});
  RequestRecord rec;
  rec.model = r.info->model_name;
  rec.endpoint = kEndpoint;
  rec.status = 200;
  ctx.metrics().record(rec);
}

// Reads the whole body from `req.body_reader` into `out`, up to `limit` bytes. Errors: 413
// beyond the limit, 400 when the body breaks off.
std::optional<ApiError> read_body(const http::Request& req, size_t limit, std::string& out) {
  char buf[16384];
  for (;;) {
    const long n = req.body_reader->read(buf, sizeof(buf));
    if (n == 0) return std::nullopt;
    if (n < 0)
      return ApiError{400, fmt::format("the request body could not be read: {}", req.body_reader->error()),
                      "invalid_request_error", "", "bad_body"};
    if (out.size() + static_cast<size_t>(n) > limit) return body_too_large(limit);
    out.append(buf, static_cast<size_t>(n));
  }
}

void handle_json(ServerContext& ctx, const http::Request& req, http::Response& res) {
  http::Request parsed;
  if (auto e = read_body(req, ctx.config().max_body_bytes, parsed.body)) {
    res.close = true;
    return ctx.send_error(res, kEndpoint, *e);
  }
  ApiError err;
  std::optional<json> body = ServerContext::parse_body(parsed, err);
  if (!body) return ctx.send_error(res, kEndpoint, err);
  ReloadOptions ro;
  std::string sha;
  for (auto e : {json_get(*body, "path", ro.model_path), json_get(*body, "tokenizer", ro.tokenizer_path),
                 json_get(*body, "sha256", sha), json_get(*body, "name", ro.model_name)}) {
    if (e) return ctx.send_error(res, kEndpoint, *e);
  }
  if (ro.model_path.empty())
    return ctx.send_error(res, kEndpoint,
                          {400, "'path' is required (or upload the model as multipart field 'model')",
                           "invalid_request_error", "path", "missing_field"});
  if (!sha.empty()) {
    if (!is_hex_sha256(sha))
      return ctx.send_error(
          res, kEndpoint, {400, "'sha256' must be 64 hex digits", "invalid_request_error", "sha256", "invalid_value"});
    const std::string got = sha256_file(ro.model_path);
    if (got.empty())
      return ctx.send_error(
          res, kEndpoint,
          {422, fmt::format("cannot read '{}'", ro.model_path), "invalid_request_error", "path", "model_load_failed"});
    if (got != lower(sha))
      return ctx.send_error(res, kEndpoint,
                            {400, fmt::format("sha256 mismatch: the file has {}, expected {}", got, lower(sha)),
                             "invalid_request_error", "sha256", "sha256_mismatch"});
  }
  do_reload(ctx, res, std::move(ro), "");
}

void handle_multipart(ServerContext& ctx, const http::Request& req, http::Response& res) {
  fs::path dir_path = ctx.upload_dir();
  if (dir_path.empty()) dir_path = fs::path(ctx.service().model_path()).parent_path();
  if (dir_path.empty()) dir_path = fs::current_path();
  const std::string dir = dir_path.string();
  std::string tmp_path;
  int fd = -1;
  Sha256 hash;
  std::string field, filename, error;
  int error_status = 400;
  std::map<std::string, std::string> fields;
  size_t n_model_bytes = 0;
  bool got_model = false;
  const size_t kMaxField = 4096;

  auto on_part = [&](const http::MultipartPart& part) {
    field = part.name;
    if (field == "model") {
      if (got_model) {
        error = "more than one 'model' part";
        return false;
      }
      got_model = true;
      filename = part.filename;
      std::string ext = fs::path(filename).extension().string();
      if (ext.size() > 16 || ext.find_first_of("/\\") != std::string::npos) ext.clear();
      std::string tmpl = fmt::format("{}{}", (fs::path(dir) / ".edgelm-upload-XXXXXX").string(), ext);
      std::vector<char> name(tmpl.begin(), tmpl.end());
      name.push_back('\0');
      fd = mkstemps(name.data(), static_cast<int>(ext.size()));
      if (fd < 0) {
        error = fmt::format("cannot create a temporary file in '{}': {}", dir, std::strerror(errno));
        error_status = errno == ENOSPC || errno == EDQUOT || errno == EFBIG ? 507 : 500;
        return false;
      }
      tmp_path = name.data();
    } else {
      fields[field];
    }
    return true;
  };
  auto on_data = [&](const char* data, size_t n) {
    if (field == "model") {
      if (n_model_bytes + n > ctx.config().max_upload_bytes) {
        error = fmt::format("the upload is larger than the limit of {} bytes (max_upload_bytes)",
                            ctx.config().max_upload_bytes);
        error_status = 413;
        return false;
      }
      hash.update(data, n);
      n_model_bytes += n;
      while (n > 0) {
        const ssize_t w = ::write(fd, data, n);
        if (w < 0) {
          if (errno == EINTR) continue;
          const bool full = errno == ENOSPC || errno == EDQUOT || errno == EFBIG;
          error = fmt::format("cannot write the upload to '{}': {}{}", dir, std::strerror(errno),
                              full ? " (the disk is full; the current model keeps serving)" : "");
          error_status = full ? 507 : 500;
          return false;
        }
        data += w;
        n -= static_cast<size_t>(w);
      }
      return true;
    }
    std::string& v = fields[field];
    if (v.size() + n > kMaxField) {
      error = fmt::format("the field '{}' is longer than {} bytes", field, kMaxField);
      return false;
    }
    v.append(data, n);
    return true;
  };
  Result<std::string> boundary = http::multipart_boundary(req.header("Content-Type"));
  if (!boundary.ok()) {
    error = boundary.error().message;
  } else {
    http::MultipartParser parser(*boundary, on_part, on_data);
    std::vector<char> buf(1 << 16);
    for (;;) {
      const long n = req.body_reader->read(buf.data(), buf.size());
      if (n < 0) {
        if (error.empty()) error = fmt::format("the upload broke off: {}", req.body_reader->error());
        break;
      }
      if (n == 0) {
        if (!parser.finish() && error.empty()) error = parser.error();
        break;
      }
      if (!parser.feed(buf.data(), static_cast<size_t>(n))) {
        if (error.empty()) error = parser.error();
        break;
      }
    }
  }
  if (fd >= 0 && ::fsync(fd) != 0 && error.empty()) {
    const bool full = errno == ENOSPC || errno == EDQUOT || errno == EFBIG;
    error = fmt::format("cannot write the upload: {}", std::strerror(errno));
    error_status = full ? 507 : 500;
  }
  if (fd >= 0 && ::close(fd) != 0 && error.empty()) error = "cannot write the upload";
  auto fail = [&](int status, const std::string& msg, const char* param, const char* code) {
    if (!tmp_path.empty()) std::remove(tmp_path.c_str());
    res.close = true;  // the rest of the body, if any, is not read
    ctx.send_error(res, kEndpoint,
                   {status, msg, status >= 500 ? "server_error" : "invalid_request_error", param, code});
  };
  if (!error.empty())
    return fail(error_status, error, "model", error_status == 507 ? "insufficient_storage" : "upload_failed");
  if (!got_model || n_model_bytes == 0)
    return fail(400, "the multipart body has no (non-empty) file field 'model'", "model", "missing_field");
  const std::string got = hash.hex_digest();
  if (auto it = fields.find("sha256"); it != fields.end() && !it->second.empty()) {
    const std::string want = lower(it->second);
    if (!is_hex_sha256(want)) return fail(400, "'sha256' must be 64 hex digits", "sha256", "invalid_value");
    if (got != want)
      return fail(400, fmt::format("sha256 mismatch: the upload has {}, expected {}", got, want), "sha256",
                  "sha256_mismatch");
  }
  ReloadOptions ro;
  ro.tokenizer_path = fields["tokenizer"];
  ro.model_name = fields["name"];
  if (ro.model_name.empty()) ro.model_name = fs::path(filename).stem().string();
  if (ro.model_name.empty()) ro.model_name = "uploaded";
  // Loaded from its stable name, so the model's path (drain's model_path, a rollback's
  // target) names a file that stays. The same upload kept before is reused as it is (same
  // name and checksum: the same bytes) and never deleted; a new one is deleted if it fails.
  const std::string kept = (fs::path(dir) / fmt::format("{}-{}{}", ro.model_name, got.substr(0, 12),
                                                        fs::path(tmp_path).extension().string()))
                               .string();
  std::error_code ec;
  std::string delete_on_failure = kept;
  if (fs::exists(kept, ec)) {
    std::remove(tmp_path.c_str());
    delete_on_failure.clear();
  } else if (fs::rename(tmp_path, kept, ec); ec) {
    return fail(500, fmt::format("cannot keep the upload as '{}': {}", kept, ec.message()), "model", "upload_failed");
  }
  ro.model_path = kept;
  do_reload(ctx, res, ro, delete_on_failure);
}

void handle_reload(ServerContext& ctx, const http::Request& req, http::Response& res) {
  if (!check_admin(ctx, req, res)) return;
  if (ctx.draining.load()) {
    res.set_header("Connection", "close");
    return ctx.send_error(res, kEndpoint, {503, "the server is shutting down", "server_error", "", "shutting_down"});
  }
  ApiError err;
  if (!ctx.check_ready(err)) return ctx.send_error(res, kEndpoint, err);
  ++ctx.in_flight;
  struct Release {
    std::atomic<int>& n;
    ~Release() { --n; }
  } release{ctx.in_flight};
  if (req.is_multipart()) return handle_multipart(ctx, req, res);
  handle_json(ctx, req, res);
}

}  // namespace

bool check_admin_token(ServerContext& ctx, const http::Request& req, http::Response& res, const std::string& endpoint) {
  return check_admin(ctx, req, res, endpoint.c_str());
}

void register_admin_routes(http::Server& svr, ServerContext& ctx) {
  http::Route r;
  r.method = "POST";
  r.path = kEndpoint;
  r.cls = http::RouteClass::control;
  r.body = http::BodyMode::streamed;  // uploads flow to disk as they arrive
  // The multipart framing around the model adds a little to max_upload_bytes.
  r.max_body_bytes = std::max(ctx.config().max_body_bytes, ctx.config().max_upload_bytes + (size_t{1} << 20));
  r.handler = [&ctx](http::Request& req, http::Response& res) { handle_reload(ctx, req, res); };
  svr.add(std::move(r));
  register_drain_routes(svr, ctx);
  register_kv_routes(svr, ctx);
}

}  // namespace edgelm::serve
