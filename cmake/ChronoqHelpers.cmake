# Warning and sanitizer flags are INTERFACE targets linked PRIVATE, so they
# apply to chronoq's own code and never leak into an embedding program.
add_library(chronoq_warnings INTERFACE)
target_compile_options(chronoq_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
  # GCC 12 flags designated initializers that leave defaulted members out.
  -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(chronoq_warnings INTERFACE -Wthread-safety)
endif()
# GCC 12 warns (-Wtsan) that TSan cannot model the atomic_thread_fence inside
# Boost.Asio, which -Werror would turn into a broken `make tsan`.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND "thread" IN_LIST CHRONOQ_SANITIZE)
  target_compile_options(chronoq_warnings INTERFACE -Wno-tsan)
endif()
if(CHRONOQ_WERROR)
  target_compile_options(chronoq_warnings INTERFACE -Werror)
endif()

add_library(chronoq_sanitizers INTERFACE)
if(CHRONOQ_SANITIZE)
  list(JOIN CHRONOQ_SANITIZE "," _san)
  target_compile_options(chronoq_sanitizers INTERFACE
    -fsanitize=${_san} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(chronoq_sanitizers INTERFACE -fsanitize=${_san})
endif()

# The allocator of chronoq's programs (chronoqd, chronoq-bench; never the
# library, whose embedder chooses): jemalloc (Debian's libjemalloc), which
# took the C library's malloc from about a tenth of chronoqd's CPU under W2 to
# a few percent (docs/BENCHMARKS.md, "jemalloc"). Sanitizers bring their own
# allocator, so sanitized builds keep it. CHRONOQ_JEMALLOC tells the code.
add_library(chronoq_allocator INTERFACE)
if(CHRONOQ_JEMALLOC AND NOT CHRONOQ_SANITIZE)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(JEMALLOC REQUIRED IMPORTED_TARGET jemalloc)
  target_link_libraries(chronoq_allocator INTERFACE PkgConfig::JEMALLOC)
  target_compile_definitions(chronoq_allocator INTERFACE CHRONOQ_JEMALLOC=1)
endif()

# The throwaway PostgreSQL cluster of the tests (scripts/pg-cluster.sh): ctest
# starts it in this directory before the first test that needs it (fixture
# `postgres`) and stops it after the last, even when tests fail.
set(CHRONOQ_TEST_PG_DIR ${CMAKE_BINARY_DIR}/pg-test)

# chronoq_add_test(NAME name SRCS a.cc ... [DEPS libs ...] [LABELS l ...]
#                  [TIMEOUT seconds] [NO_MAIN] [POSTGRES]
#                  [BOTH_STORES [ONCE gtest-pattern ...]])
# Every test case gets a ctest timeout (default 60 s, a few times the slowest
# case's normal time under ASan), so a hang fails fast and by name. NO_MAIN:
# the test brings its own main() (it links gmock without gmock_main).
# POSTGRES: every case requires the `postgres` fixture and finds the cluster's
# conninfo file through $CHRONOQ_TEST_PG (tests/support/pg_test_db.h); label pg
# (or e2e-pg, ...: see below).
# BOTH_STORES: ctest runs the binary's cases twice, once per store
# (tests/support/test_store.h): as they are, on SQLite; and named
# "pg.<case>", with CHRONOQ_TEST_STORE=postgres, as POSTGRES says. A case
# whose name says Sqlite runs on SQLite only, one whose name says Postgres on
# PostgreSQL only; ONCE names more cases (gtest patterns) that do not depend
# on the store, so the second run leaves them out.
function(chronoq_add_test)
  cmake_parse_arguments(T "NO_MAIN;POSTGRES;BOTH_STORES" "NAME;TIMEOUT" "SRCS;DEPS;LABELS;ONCE"
    ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  set(_main GTest::gmock_main)
  if(T_NO_MAIN)
    set(_main GTest::gmock)
  endif()
  add_executable(${T_NAME} ${T_SRCS})
  target_link_libraries(${T_NAME} PRIVATE chronoq_testing ${T_DEPS}
    ${_main} chronoq_warnings chronoq_sanitizers)
  # GCC 12 at -O2 and above reports std::string concatenations in test code
  # as overlapping memcpys (-Wrestrict, GCC bug 105329) and aggregates in
  # initializer lists as maybe uninitialized: false positives, in optimised
  # builds of the tests only.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${T_NAME} PRIVATE
      $<$<CONFIG:Release,RelWithDebInfo,MinSizeRel>:-Wno-restrict -Wno-maybe-uninitialized>)
  endif()
  # One label per case: gtest_discover_tests takes a list of labels apart
  # (CMake 3.25), so a case labelled e2e that runs on PostgreSQL is labelled
  # e2e-pg. ctest -L takes a regular expression: -L e2e and -L pg both match it.
  list(JOIN T_LABELS "-" _label)
  set(_pg_label pg)
  if(_label)
    set(_pg_label ${_label}-pg)
  endif()
  set(_properties TIMEOUT ${T_TIMEOUT})
  set(_pg_properties ${_properties} FIXTURES_REQUIRED postgres
    ENVIRONMENT CHRONOQ_TEST_PG=${CHRONOQ_TEST_PG_DIR}/conninfo LABELS ${_pg_label})
  if(T_POSTGRES)
    set(_properties ${_pg_properties})
  elseif(_label)
    list(APPEND _properties LABELS ${_label})
  endif()
  if(NOT T_BOTH_STORES)
    gtest_discover_tests(${T_NAME} PROPERTIES ${_properties} DISCOVERY_TIMEOUT 60)
    return()
  endif()
  list(JOIN T_ONCE ":" _once)
  gtest_discover_tests(${T_NAME} TEST_FILTER "-*Postgres*"
    PROPERTIES ${_properties} DISCOVERY_TIMEOUT 60)
  gtest_discover_tests(${T_NAME} TEST_PREFIX "pg." TEST_FILTER "-*Sqlite*:${_once}"
    PROPERTIES ${_pg_properties} ENVIRONMENT_MODIFICATION CHRONOQ_TEST_STORE=set:postgres
    DISCOVERY_TIMEOUT 60)
endfunction()

# chronoq_library(NAME lib DIR dir SRCS a.cc ... [HEADERS h ...]
#                 [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Builds the component in src/<DIR> as a static library. Its headers are
# reached as "<DIR>/x.h", and only by code that links it: the library exposes
# an include root of its own that holds <DIR> alone (a link to src/<DIR>, or,
# with HEADERS, links to just those files), so an include that runs the wrong
# way (core including a store implementation, the server including core
# internals) does not compile. The public API (include/) is visible to all.
function(chronoq_library)
  cmake_parse_arguments(L "" "NAME;DIR" "SRCS;HEADERS;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  set(root ${CMAKE_BINARY_DIR}/include-roots/${L_NAME})
  if(L_HEADERS)
    file(MAKE_DIRECTORY ${root}/${L_DIR})
    foreach(h ${L_HEADERS})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${L_DIR}/${h} ${root}/${L_DIR}/${h} SYMBOLIC)
    endforeach()
  else()
    get_filename_component(parent ${root}/${L_DIR} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${L_DIR} ${root}/${L_DIR} SYMBOLIC)
  endif()
  if(L_SRCS)
    add_library(${L_NAME} STATIC ${L_SRCS})
    target_include_directories(${L_NAME} PUBLIC ${root} ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(${L_NAME} PUBLIC ${L_PUBLIC_DEPS}
      PRIVATE ${L_PRIVATE_DEPS} chronoq_warnings chronoq_sanitizers)
  else()
    add_library(${L_NAME} INTERFACE)
    target_include_directories(${L_NAME} INTERFACE ${root} ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(${L_NAME} INTERFACE ${L_PUBLIC_DEPS})
  endif()
endfunction()
