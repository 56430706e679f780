# decode (tools)
decode_tool(decode decode.c)
target_include_directories(decode PRIVATE ${CJSON_INCLUDE_DIRS})
target_link_libraries(decode PRIVATE ${CJSON_LIBRARIES})
