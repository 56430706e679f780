# tokenizer (tests)
decode_test(test_tokenizer model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer.c)
decode_test(test_tokenizer_synth model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_synth.c)
decode_test(test_tokenizer_tool model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_tool.c)
