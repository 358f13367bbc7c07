# The Debian packages (CPack's DEB generator; `make deb`, tests/install), made
# from the install components of cmake/ChronoqInstall.cmake:
#
#   chronoq      Runtime + Service: chronoqd, chronoq, chronoq-admin,
#                libchronoq.so.N, the systemd unit, /etc/chronoq/chronoqd.toml
#                (a conffile); Depends computed by dpkg-shlibdeps
#   chronoq-dev  Development: the headers, libchronoq.a, the libchronoq.so link,
#                the CMake package and chronoq.pc; it depends on chronoq and on
#                the -dev packages the CMake package and chronoq.pc find
#
# Everything below /usr; the unit and the configuration at their Debian places
# whatever CMAKE_INSTALL_PREFIX the tree was configured with, so a package
# made from any tree (the Release one of `make deb`, the ASan one of
# `make test`) has the same layout.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME chronoq)
set(CPACK_PACKAGE_VENDOR chronoq)
set(CPACK_PACKAGE_CONTACT "chronoq developers <dev@chronoq.local>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL Runtime Service Development)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(_debian ${PROJECT_SOURCE_DIR}/packaging/debian)
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME chronoq)
# A description's first line is the package's summary.
set(CPACK_DEBIAN_SERVER_DESCRIPTION "durable timed-task engine: chronoqd, the chronoq CLI, libchronoq
chronoq runs tasks at a given time, at least once, across crashes: delayed and
expiring tasks, leased claims, retries, cron schedules, keyed locks, per-key
order. chronoqd serves its HTTP/JSON API and dashboard on SQLite or
PostgreSQL; chronoq is the command-line client; chronoq-admin copies stores.
The chronoqd.service unit is installed but neither enabled nor started.")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
  "${_debian}/postinst;${_debian}/prerm;${_debian}/postrm;${_debian}/conffiles;${_debian}/triggers")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME chronoq-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "durable timed-task engine: the C++ library, for embedding
Headers (C++20), libchronoq.a, the CMake package (find_package(chronoq CONFIG),
target chronoq::chronoq) and chronoq.pc of the chronoq engine.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "chronoq (= ${PROJECT_VERSION}), libsqlite3-dev, libpq-dev, libspdlog-dev, libhowardhinnant-date-dev")

include(CPack)
cpack_add_component_group(server)
cpack_add_component_group(dev)
cpack_add_component(Runtime GROUP server)
cpack_add_component(Service GROUP server)
cpack_add_component(Development GROUP dev DEPENDS Runtime)
