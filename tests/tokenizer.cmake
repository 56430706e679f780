# tokenizer (tests)
decode_test(test_tokenizer model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer.c)
