# runtime (tools): decode-bench, tokens per second per model and thread count (JSON via cJSON).
decode_tool(decode-bench ${CMAKE_CURRENT_SOURCE_DIR}/decode-bench.c)
target_include_directories(decode-bench PRIVATE ${CJSON_INCLUDE_DIRS})
target_link_libraries(decode-bench PRIVATE ${CJSON_LIBRARIES})
