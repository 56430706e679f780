# tokenizer (tests)
decode_test(test_tokenizer model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer.c ${CMAKE_CURRENT_SOURCE_DIR}/tool_util.c)
decode_test(test_tokenizer_synth model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_synth.c)
decode_test(test_tokenizer_tool model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_tool.c ${CMAKE_CURRENT_SOURCE_DIR}/tool_util.c)
