# gguf (tests)
decode_test(test_gguf_read model test_gguf_read.c)
decode_test(test_gguf_write model test_gguf_write.c tool_util.c)
decode_test(test_gguf_convert model test_gguf_convert.c tool_util.c)
add_dependencies(test_gguf_convert gguf-convert)
decode_test(test_gguf_info model test_gguf_info.c tool_util.c)
add_dependencies(test_gguf_info gguf-info)
decode_test(test_gguf_malformed model test_gguf_malformed.c tool_util.c)
decode_test(test_gguf_scale model test_gguf_scale.c)
# libFuzzer targets, clang only and not ctests (docs/fuzzing.md); the sources they exercise are
# compiled into them so the fuzzer's coverage and sanitizers instrument those too.
function(fuzz_target name)
  add_executable(${name} ${ARGN})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -g)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
endfunction()
if(CMAKE_C_COMPILER_ID MATCHES "Clang" AND NOT SANITIZE MATCHES "thread")
  set(P ${PROJECT_SOURCE_DIR})
  # The reader.
  fuzz_target(fuzz_gguf fuzz_gguf.c ${P}/model/gguf.c ${P}/platform/hugepage.c)
  # The tokenizer and the llama binding on whatever the reader opens.
  fuzz_target(fuzz_model fuzz_model.c ${P}/model/gguf.c ${P}/model/llama.c ${P}/model/tokenizer.c
              ${P}/model/bpe.c ${P}/model/pretok.c ${P}/model/unicode.c ${P}/model/unicode_data.c
              ${P}/platform/hugepage.c ${P}/platform/wtype.c)
endif()
