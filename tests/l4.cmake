# l4 (tests): each links the l4 library alone, which is the point of its layering.
function(l4_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE l4)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS l4)
endfunction()
l4_test(test_l4_table test_l4_table.c)
l4_test(test_l4_cache test_l4_cache.c)
