# kernel (tools)
decode_tool(roofline ${CMAKE_CURRENT_SOURCE_DIR}/roofline.c)
decode_tool(gemv-bench ${CMAKE_CURRENT_SOURCE_DIR}/gemv-bench.c)
decode_tool(gemm-bench ${CMAKE_CURRENT_SOURCE_DIR}/gemm-bench.c)
