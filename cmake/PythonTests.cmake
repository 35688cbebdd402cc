# One ctest per tests/<folder>/test_*.py of the calling folder, named PREFIX.<stem>, run from that folder;
# exit status 77 is a skip. appendguard_add_python_tests(PREFIX TIMEOUT s LABELS ... ENVIRONMENT ...
# [FIXTURES name]).
function(appendguard_add_python_tests prefix)
  cmake_parse_arguments(ARG "" "TIMEOUT;FIXTURES" "LABELS;ENVIRONMENT" ${ARGN})
  file(GLOB scripts RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_*.py)
  foreach(script ${scripts})
    get_filename_component(stem ${script} NAME_WE)
    add_test(NAME ${prefix}.${stem}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/${script}
             WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
    set_tests_properties(${prefix}.${stem} PROPERTIES
      LABELS "${ARG_LABELS}" SKIP_RETURN_CODE 77 TIMEOUT ${ARG_TIMEOUT} ENVIRONMENT "${ARG_ENVIRONMENT}")
    if(ARG_FIXTURES)
      set_tests_properties(${prefix}.${stem} PROPERTIES FIXTURES_REQUIRED ${ARG_FIXTURES})
    endif()
  endforeach()
endfunction()
