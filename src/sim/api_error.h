// ApiError: a Kubernetes `Status` failure (code, reason, message, details) as the simulator
// answers it, with constructors for the shapes in docs/reference/kubernetes-api.md ("Writes").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace gg::sim {

struct StatusCause {
  std::string reason;  // FieldValueRequired, FieldValueInvalid, DisruptionBudget, ...
  std::string message;
  std::string field;
};

struct ApiError {
  int code = 500;
  std::string reason;  // NotFound, Conflict, AlreadyExists, Invalid, Expired, ...
  std::string message;
  std::string name, group, kind;  // details
  std::vector<StatusCause> causes;
  int retry_after_seconds = 0;

  nlohmann::json ToJson() const;
  std::string Body() const { return ToJson().dump(); }
};

// "nodes", "leases.coordination.k8s.io"
std::string QualifiedResource(std::string_view resource, std::string_view group);

ApiError NotFoundErr(std::string_view resource, std::string_view group, std::string_view name);
ApiError AlreadyExistsErr(std::string_view resource, std::string_view group, std::string_view name);
ApiError ConflictErr(std::string_view resource, std::string_view group, std::string_view name);
ApiError ConflictErrMsg(std::string_view resource, std::string_view group, std::string_view name,
                        std::string_view msg);
// 422: "<Kind> \"<name>\" is invalid: <field>: <msg>, ..."
ApiError InvalidErr(std::string_view kind, std::string_view group, std::string_view name,
                    std::vector<StatusCause> causes);
ApiError BadRequestErr(std::string msg);
ApiError PathNotFoundErr();  // "the server could not find the requested resource"
ApiError MethodNotAllowedErr(std::string msg);
ApiError UnsupportedMediaTypeErr(std::string_view content_type);
ApiError ExpiredErr(std::string msg);
ApiError InternalErr(std::string msg);
ApiError ForbiddenErr(std::string msg);
ApiError StatusCodeErr(int code);  // generic for fault injection

}  // namespace gg::sim
