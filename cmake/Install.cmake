# `cmake --install`: GNUInstallDirs locations (override with -DCMAKE_INSTALL_BINDIR=..., LIBDIR, ...).
# The launcher finds the library through the relative path between the two, compiled in (src/cli), so
# any prefix and any LIBDIR (lib, lib64, lib/x86_64-linux-gnu) works, moved as a whole or not.
# The wheel (pyproject.toml) installs with prefix <site-packages>/appendguard, BINDIR bin, LIBDIR lib.
install(TARGETS appendguard LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
install(TARGETS appendguard_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
# appendonlyfs (when built) installs itself to CMAKE_INSTALL_BINDIR (src/appendonlyfs).
if(NOT SKBUILD)  # a wheel carries its licence in its metadata (pyproject.toml)
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
          COMPONENT runtime)
endif()
# The man page, appendguard(1), and the documents the messages name (docs/*.md). A wheel puts the page in
# its data directory (<prefix>/share/man/man1, where `man` looks beside <prefix>/bin) and the documents in
# the package (appendguard/docs).
file(GLOB APPENDGUARD_DOCS ${PROJECT_SOURCE_DIR}/docs/*.md)
if(SKBUILD)
  install(FILES ${PROJECT_SOURCE_DIR}/docs/appendguard.1 DESTINATION ${SKBUILD_DATA_DIR}/share/man/man1
          COMPONENT runtime)
  install(FILES ${APPENDGUARD_DOCS} DESTINATION docs COMPONENT runtime)
else()
  install(FILES ${PROJECT_SOURCE_DIR}/docs/appendguard.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
  install(FILES ${APPENDGUARD_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT runtime)
endif()
