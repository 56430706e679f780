# tokenizer (tests)
decode_test(test_tokenizer model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer.c ${CMAKE_CURRENT_SOURCE_DIR}/tool_util.c)
target_compile_definitions(test_tokenizer PRIVATE SOURCE_DIR="${PROJECT_SOURCE_DIR}")
decode_test(test_tokenizer_synth model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_synth.c
            ${CMAKE_CURRENT_SOURCE_DIR}/tool_util.c)
decode_test(test_tokenizer_tool model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_tool.c ${CMAKE_CURRENT_SOURCE_DIR}/tool_util.c)
decode_test(test_tokenizer_user model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_user.c ${CMAKE_CURRENT_SOURCE_DIR}/tool_util.c)
decode_test(test_tokenizer_bound model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_bound.c)
decode_test(test_tokenizer_split model ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_split.c ${CMAKE_CURRENT_SOURCE_DIR}/tool_util.c)
# Ids against llama.cpp itself; skipped (77) when the peer is not installed.
add_test(NAME peer_tokenizer COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/peer_tokenizer.sh ${CMAKE_BINARY_DIR})
set_tests_properties(peer_tokenizer PROPERTIES LABELS peer SKIP_RETURN_CODE 77 TIMEOUT 900)
