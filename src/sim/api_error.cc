// Kubernetes Status bodies (apimachinery errors.go shapes).
#include "sim/api_error.h"

namespace gg::sim {

nlohmann::json ApiError::ToJson() const {
  nlohmann::json j = {
      {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
      {"status", "Failure"}, {"message", message}, {"reason", reason},
      {"code", code}};
  nlohmann::json details = nlohmann::json::object();
  if (!name.empty()) details["name"] = name;
  if (!group.empty()) details["group"] = group;
  if (!kind.empty()) details["kind"] = kind;
  if (!causes.empty()) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& c : causes) {
      nlohmann::json cj = nlohmann::json::object();
      if (!c.reason.empty()) cj["reason"] = c.reason;
      if (!c.message.empty()) cj["message"] = c.message;
      if (!c.field.empty()) cj["field"] = c.field;
      arr.push_back(std::move(cj));
    }
    details["causes"] = std::move(arr);
  }
  if (retry_after_seconds > 0) details["retryAfterSeconds"] = retry_after_seconds;
  if (!details.empty()) j["details"] = std::move(details);
  if (reason.empty()) j.erase("reason");
  return j;
}

std::string QualifiedResource(std::string_view resource, std::string_view group) {
  std::string s(resource);
  if (!group.empty()) {
    s += '.';
    s += group;
  }
  return s;
}

ApiError NotFoundErr(std::string_view resource, std::string_view group, std::string_view name) {
  ApiError e;
  e.code = 404;
  e.reason = "NotFound";
  e.message = QualifiedResource(resource, group) + " \"" + std::string(name) + "\" not found";
  e.name = name;
  e.group = group;
  e.kind = resource;
  return e;
}

ApiError AlreadyExistsErr(std::string_view resource, std::string_view group,
                          std::string_view name) {
  ApiError e;
  e.code = 409;
  e.reason = "AlreadyExists";
  e.message = QualifiedResource(resource, group) + " \"" + std::string(name) + "\" already exists";
  e.name = name;
  e.group = group;
  e.kind = resource;
  return e;
}

ApiError ConflictErrMsg(std::string_view resource, std::string_view group, std::string_view name,
                        std::string_view msg) {
  ApiError e;
  e.code = 409;
  e.reason = "Conflict";
  e.message = "Operation cannot be fulfilled on " + QualifiedResource(resource, group) + " \"" +
              std::string(name) + "\": " + std::string(msg);
  e.name = name;
  e.group = group;
  e.kind = resource;
  return e;
}

ApiError ConflictErr(std::string_view resource, std::string_view group, std::string_view name) {
  return ConflictErrMsg(resource, group, name,
                        "the object has been modified; please apply your changes to the latest "
                        "version and try again");
}

ApiError InvalidErr(std::string_view kind, std::string_view group, std::string_view name,
                    std::vector<StatusCause> causes) {
  ApiError e;
  e.code = 422;
  e.reason = "Invalid";
  std::string msg = std::string(kind) + " \"" + std::string(name) + "\" is invalid: ";
  if (causes.size() > 1) msg += "[";
  for (std::size_t i = 0; i < causes.size(); ++i) {
    if (i) msg += ", ";
    if (!causes[i].field.empty()) msg += causes[i].field + ": ";
    msg += causes[i].message;
  }
  if (causes.size() > 1) msg += "]";
  e.message = std::move(msg);
  e.name = name;
  e.group = group;
  e.kind = kind;
  e.causes = std::move(causes);
  return e;
}

ApiError BadRequestErr(std::string msg) {
  ApiError e;
  e.code = 400;
  e.reason = "BadRequest";
  e.message = std::move(msg);
  return e;
}

ApiError PathNotFoundErr() {
  ApiError e;
  e.code = 404;
  e.reason = "NotFound";
  e.message = "the server could not find the requested resource";
  return e;
}

ApiError MethodNotAllowedErr(std::string msg) {
  ApiError e;
  e.code = 405;
  e.reason = "MethodNotAllowed";
  e.message = std::move(msg);
  return e;
}

ApiError UnsupportedMediaTypeErr(std::string_view content_type) {
  ApiError e;
  e.code = 415;
  e.reason = "UnsupportedMediaType";
  e.message =
      "the body of the request was in an unknown format - accepted media types include: "
      "application/json-patch+json, application/merge-patch+json, "
      "application/apply-patch+yaml";
  if (!content_type.empty()) e.message += " (got " + std::string(content_type) + ")";
  return e;
}

ApiError ExpiredErr(std::string msg) {
  ApiError e;
  e.code = 410;
  e.reason = "Expired";
  e.message = std::move(msg);
  return e;
}

ApiError InternalErr(std::string msg) {
  ApiError e;
  e.code = 500;
  e.reason = "InternalError";
  e.message = "Internal error occurred: " + msg;
  return e;
}

ApiError ForbiddenErr(std::string msg) {
  ApiError e;
  e.code = 403;
  e.reason = "Forbidden";
  e.message = std::move(msg);
  return e;
}

ApiError StatusCodeErr(int code) {
  ApiError e;
  e.code = code;
  switch (code) {
    case 429:
      e.reason = "TooManyRequests";
      e.message = "Too many requests, please try again later.";
      break;
    case 503:
      e.reason = "ServiceUnavailable";
      e.message = "the server is currently unable to handle the request";
      break;
    case 504:
      e.reason = "Timeout";
      e.message = "the server was unable to return a response in the time allotted";
      break;
    case 500:
      e.reason = "InternalError";
      e.message = "Internal error occurred: injected fault";
      break;
    default:
      e.reason = "Unknown";
      e.message = "injected fault";
  }
  return e;
}

}  // namespace gg::sim
