# `cmake --install`: the three binaries; the libraries an engine links, their
# headers, a CMake package (find_package(pikv) -> pikv::client and the
# others) and a pkg-config file. The daemons' own libraries (node, storage,
# controller, http) are not installed: they are the binaries' insides.
include(CMakePackageConfigHelpers)

set(PIKV_PUBLIC_PARTS common proto transport coord device rpc client engine launch)
set(PIKV_PUBLIC_TARGETS pikv_common pikv_proto pikv_transport pikv_coord pikv_device pikv_rpc pikv_client
                        pikv_reference_model pikv_engine pikv_launch)
set(PIKV_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pikv)

install(TARGETS pikv pikv-node pikv-controller RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${PIKV_PUBLIC_TARGETS} EXPORT pikvTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(part ${PIKV_PUBLIC_PARTS})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${part}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(EXPORT pikvTargets NAMESPACE pikv:: DESTINATION ${PIKV_CMAKE_DIR})

configure_package_config_file(cmake/pikvConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/pikvConfig.cmake INSTALL_DESTINATION ${PIKV_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pikvConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pikvConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/pikvConfigVersion.cmake
        DESTINATION ${PIKV_CMAKE_DIR})

# Relative to the .pc file, so the package works wherever --prefix puts it.
file(RELATIVE_PATH PIKV_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(cmake/pikv.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pikv.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pikv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
