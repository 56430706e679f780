# l4 (tools): the bench links the l4 library alone.
add_executable(l4-bench ${CMAKE_CURRENT_SOURCE_DIR}/l4-bench.c)
target_link_libraries(l4-bench PRIVATE l4 m)
