# Small helpers so each folder's CMakeLists.txt stays a few lines (Abseil-style).
#
# gg_library(NAME <target> [SRCS ...] [DEPS ...])
#   Without SRCS, every *.cc in the folder that is not a *_test.cc / *_fuzz.cc / *_bench.cc.
# gg_test(NAME <target> LABELS <unit|sim|integration|gpu> [SRCS ...] [DEPS ...] [TIMEOUT s])
#   Without SRCS, every *_test.cc in the folder. Tests are discovered per TEST() for ctest.
# gg_binary(NAME <target> SRCS ... DEPS ...) -> ${GG_BIN_DIR}/<target>

function(gg_library)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  if(NOT A_SRCS)
    file(GLOB A_SRCS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
    list(FILTER A_SRCS EXCLUDE REGEX "(_test|_fuzz|_bench)\\.cc$")
  endif()
  if(NOT A_SRCS)
    # Header-only so far (the tree grows one file at a time).
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
    file(GLOB A_SRCS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  endif()
  if(NOT A_SRCS)
    return()
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
