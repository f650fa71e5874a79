# Small helpers so each folder's CMakeLists.txt stays a few lines (Abseil-style).
#
# gg_library(NAME <target> SRCS ... [DEPS ...])
# gg_test(NAME <target> LABELS <unit|sim|integration|gpu> SRCS ... [DEPS ...] [TIMEOUT s])
#   Tests are discovered per TEST() for ctest.
# Source lists are explicit (no globbing): a file is built only once a CMakeLists.txt names
# it, and scripts/check-sources-listed.sh (a unit test) fails when one is not named.
# gg_binary(NAME <target> SRCS ... DEPS ...) -> ${GG_BIN_DIR}/<target>

function(gg_library)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  if(NOT A_SRCS)
    # Header-only.
    add_library(${A_NAME} INTERFACE)
    target_include_directories(${A_NAME} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${A_NAME} INTERFACE ${A_DEPS})
    return()
  endif()
  add_library(${A_NAME} STATIC ${A_SRCS})
  target_include_directories(${A_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${A_NAME} PUBLIC ${A_DEPS})
endfunction()

function(gg_test)
  cmake_parse_arguments(A "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT A_SRCS)
    message(FATAL_ERROR "gg_test(${A_NAME}): SRCS is required")
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  add_executable(${A_NAME} ${A_SRCS})
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} GTest::gmock GTest::gtest_main Threads::Threads)
  target_compile_definitions(${A_NAME} PRIVATE
    GG_SOURCE_DIR="${PROJECT_SOURCE_DIR}" GG_BIN_DIR="${GG_BIN_DIR}")
  gtest_discover_tests(${A_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT})
endfunction()

function(gg_binary)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  set_target_properties(${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${GG_BIN_DIR})
endfunction()
