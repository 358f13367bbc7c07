# What `cmake --install` installs, and the CMake package and pkg-config file
# that find it (docs/ARCHITECTURE.md, "The installed library"). Included by the
# top-level CMakeLists.txt once every target of src/ exists.
#
# libchronoq is one library, static (libchronoq.a) and shared
# (libchronoq.so.<soversion>), made of the object files of `chronoq` (the
# engine's entry point, src/engine) and of every component library it links,
# found by walking its link dependencies: nothing is compiled twice, and a
# component added to the engine later is in it without a change here. The
# component archives stay internal; an installed program links one library.

include(CMakePackageConfigHelpers)

# Install components: Runtime (the programs and libchronoq.so.N), Development
# (headers, libchronoq.a, the libchronoq.so link, the CMake package, chronoq.pc)
# and Service (the systemd unit and /etc/chronoq/chronoqd.toml: absolute Debian
# paths, so only a component install or the package installs them, never a
# plain `cmake --install --prefix DIR`).
set(CHRONOQ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/chronoq)
set(CHRONOQ_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# --- The component closure of `chronoq` ----------------------------------------
# Every chronoq_* library `chronoq` reaches through its link dependencies, and
# every third-party library they link. chronoq_warnings and chronoq_sanitizers
# are build flags, not code.
set(_queue chronoq)
set(_seen "")
set(CHRONOQ_LIB_COMPONENTS "")
set(_external "")
while(_queue)
  list(POP_FRONT _queue _target)
  if(_target IN_LIST _seen)
    continue()
  endif()
  list(APPEND _seen ${_target})
  get_target_property(_type ${_target} TYPE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(_deps ${_target} INTERFACE_LINK_LIBRARIES)
  else()
    list(APPEND CHRONOQ_LIB_COMPONENTS ${_target})
    get_target_property(_deps ${_target} LINK_LIBRARIES)
  endif()
  if(NOT _deps)
    continue()
  endif()
  foreach(_dep IN LISTS _deps)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _dep "${_dep}")
    if(_dep MATCHES "^chronoq_(warnings|sanitizers)$")
      continue()
    elseif(_dep MATCHES "^chronoq" AND TARGET ${_dep})
      list(APPEND _queue ${_dep})
    else()
      list(APPEND _external ${_dep})
    endif()
  endforeach()
endwhile()
list(REMOVE_DUPLICATES _external)

# How an installed chronoq finds each third-party library the engine links:
# the package its CMake config finds (find_dependency) and what chronoq.pc
# says (a pkg-config module for Requires.private, else flags for
# Libs.private). Header-only ones (nlohmann_json, date's headers) need
# nothing. A new dependency of the engine stops the configuration here until
# it has a line. libpq is -lpq, not Requires.private libpq: Debian's libpq.pc
# lists static libraries libpq-dev does not ship (-lpgcommon, -lpgport), so
# `pkg-config --static` would fail on them.
set(_known_external
  "Threads::Threads|Threads||-pthread"
  "SQLite::SQLite3|SQLite3|sqlite3|"
  "PostgreSQL::PostgreSQL|PostgreSQL||-lpq"
  "spdlog::spdlog|spdlog|spdlog|"
  "date::date-tz|date||-ldate-tz"
  "absl::btree|absl|absl_btree|")
set(CHRONOQ_LINK_DEPS "")
set(CHRONOQ_FIND_DEPS "")
set(CHRONOQ_PC_REQUIRES "")
set(CHRONOQ_PC_LIBS "")
foreach(_dep IN LISTS _external)
  set(_line "")
  foreach(_known IN LISTS _known_external)
    if(_known MATCHES "^${_dep}\\|")
      set(_line ${_known})
    endif()
  endforeach()
  if(NOT _line)
    if(TARGET ${_dep})
      get_target_property(_type ${_dep} TYPE)
      get_target_property(_links ${_dep} INTERFACE_LINK_LIBRARIES)
      if(_type STREQUAL "INTERFACE_LIBRARY" AND NOT _links)
        continue()  # header-only
      endif()
    endif()
    message(FATAL_ERROR "libchronoq links ${_dep}: say how an installed chronoq finds it "
      "(_known_external in cmake/ChronoqInstall.cmake)")
  endif()
  string(REPLACE "|" ";" _fields "${_line}|")
  list(GET _fields 1 _package)
  list(GET _fields 2 _module)
  list(GET _fields 3 _flags)
  list(APPEND CHRONOQ_LINK_DEPS ${_dep})
  list(APPEND CHRONOQ_FIND_DEPS ${_package})
  if(_module)
    list(APPEND CHRONOQ_PC_REQUIRES ${_module})
  endif()
  if(_flags)
    list(APPEND CHRONOQ_PC_LIBS ${_flags})
  endif()
endforeach()
list(REMOVE_DUPLICATES CHRONOQ_FIND_DEPS)

# --- libchronoq.a and libchronoq.so --------------------------------------------
# The components' objects go into the shared library too, so they are built
# position-independent; they are compiled with hidden visibility, and the
# public headers (include/chronoq/) alone mark their declarations default
# (`#pragma GCC visibility push(default)`), so the shared library exports the
# public API and no internal class (cmake/libchronoq.map, below, drops the
# std, nlohmann and fmt template instances; tests/install checks the exports
# with nm -D). Both are no-ops for the static programs and tests that link
# the components.
set_target_properties(${CHRONOQ_LIB_COMPONENTS} PROPERTIES
  POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
set(_objects "")
foreach(_component IN LISTS CHRONOQ_LIB_COMPONENTS)
  list(APPEND _objects $<TARGET_OBJECTS:${_component}>)
endforeach()

# Before 1.0 every minor release may break the ABI: the soname carries major
# and minor (libchronoq.so.0.1); from 1.0 on, the major alone.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(CHRONOQ_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(CHRONOQ_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()

add_library(chronoq_static STATIC ${_objects})
add_library(chronoq_shared SHARED ${_objects})
set_target_properties(chronoq_static PROPERTIES EXPORT_NAME chronoq_static)
set_target_properties(chronoq_shared PROPERTIES EXPORT_NAME chronoq_shared
  VERSION ${PROJECT_VERSION} SOVERSION ${CHRONOQ_SOVERSION})
foreach(_lib chronoq_static chronoq_shared)
  # Beside the internal libchronoq.a of src/engine, under another name in the tree.
  set_target_properties(${_lib} PROPERTIES OUTPUT_NAME chronoq LINKER_LANGUAGE CXX
    ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
  target_include_directories(${_lib} INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${_lib} INTERFACE cxx_std_20)
  target_link_libraries(${_lib} PUBLIC Threads::Threads PRIVATE ${CHRONOQ_LINK_DEPS})
endforeach()
# The shared library links its dependencies itself (DT_NEEDED), and with
# -z defs a component missing from it fails the link here rather than in a
# user's program. A sanitized tree leaves the sanitizer runtime to the
# program, as sanitized shared libraries do. cmake/libchronoq.map keeps
# third-party template instances out of its exports.
set(_map ${PROJECT_SOURCE_DIR}/cmake/libchronoq.map)
set_property(TARGET chronoq_shared APPEND PROPERTY LINK_DEPENDS ${_map})
target_link_options(chronoq_shared PRIVATE LINKER:--version-script=${_map}
  $<TARGET_PROPERTY:chronoq_sanitizers,INTERFACE_LINK_OPTIONS>
  $<$<NOT:$<BOOL:${CHRONOQ_SANITIZE}>>:LINKER:-z,defs>)

# --- Install rules ---------------------------------------------------------------
# Everything the install rules take from the build: what `make deb` builds.
add_custom_target(chronoq_installable)
add_dependencies(chronoq_installable chronoqd chronoq_cli_main chronoq_admin_main chronoq_static
  chronoq_shared)
install(TARGETS chronoq_cli_main RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/OPERATIONS.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT Runtime)
install(TARGETS chronoq_static chronoq_shared EXPORT chronoqTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime NAMELINK_COMPONENT Development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/chronoq
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development FILES_MATCHING PATTERN "*.h")
install(EXPORT chronoqTargets NAMESPACE chronoq:: DESTINATION ${CHRONOQ_CMAKE_DIR}
  COMPONENT Development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/chronoqConfig.cmake.in
  ${CMAKE_BINARY_DIR}/chronoqConfig.cmake INSTALL_DESTINATION ${CHRONOQ_CMAKE_DIR})
# Before 1.0 only the same minor version is compatible, as with the soname.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_compatibility SameMinorVersion)
else()
  set(_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_BINARY_DIR}/chronoqConfigVersion.cmake
  COMPATIBILITY ${_compatibility})
install(FILES ${CMAKE_BINARY_DIR}/chronoqConfig.cmake ${CMAKE_BINARY_DIR}/chronoqConfigVersion.cmake
  DESTINATION ${CHRONOQ_CMAKE_DIR} COMPONENT Development)

# chronoq.pc finds its prefix from its own place (${pcfiledir}), so an
# install under any --prefix works without editing it.
file(RELATIVE_PATH CHRONOQ_PC_PREFIX /prefix/${CHRONOQ_PKGCONFIG_DIR} /prefix)
string(REGEX REPLACE "/$" "" CHRONOQ_PC_PREFIX "${CHRONOQ_PC_PREFIX}")
list(JOIN CHRONOQ_PC_REQUIRES " " CHRONOQ_PC_REQUIRES)
list(JOIN CHRONOQ_PC_LIBS " " CHRONOQ_PC_LIBS)
configure_file(${PROJECT_SOURCE_DIR}/cmake/chronoq.pc.in ${CMAKE_BINARY_DIR}/chronoq.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/chronoq.pc DESTINATION ${CHRONOQ_PKGCONFIG_DIR}
  COMPONENT Development)

# The service, in the Debian layout the unit names: /usr/bin/chronoqd,
# /etc/chronoq/chronoqd.toml, data in /var/lib/chronoq. EXCLUDE_FROM_ALL: only
# `cmake --install BUILD --component Service` and the package install them.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/chronoqd.service
  DESTINATION /lib/systemd/system COMPONENT Service EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/chronoqd.toml
  DESTINATION /etc/chronoq COMPONENT Service EXCLUDE_FROM_ALL)

include(${PROJECT_SOURCE_DIR}/cmake/ChronoqPackage.cmake)
