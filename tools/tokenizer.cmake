# tokenizer (tools)
decode_tool(tokenize ${CMAKE_CURRENT_SOURCE_DIR}/tokenize.c)
