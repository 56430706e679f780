# model and runtime tests (labels model / runtime)
decode_test(test_pool runtime test_pool.c)
set_tests_properties(test_pool PROPERTIES TIMEOUT 120)   # a lost wake-up hangs it
decode_test(test_llama_load model test_llama_load.c tool_util.c)
add_test(NAME test_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.sh ${CMAKE_RUNTIME_OUTPUT_DIRECTORY} ${DECODE_SHARED_DIR})
set_tests_properties(test_cli PROPERTIES LABELS "decode;runtime" ENVIRONMENT "XDG_CACHE_HOME=${CMAKE_BINARY_DIR}/test-cache")
decode_test(test_sampler runtime test_sampler.c)
# The layer order (README): fails when any file includes a layer above its own.
add_test(NAME check_layers COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/check_layers.cmake)
set_tests_properties(check_layers PROPERTIES LABELS model)
decode_test(test_tune runtime test_tune.c tool_util.c)
# Again on the AVX2 path, where the tuning's interleave must read 1 (one tile at a time).
add_test(NAME test_tune_avx2 COMMAND test_tune)
set_tests_properties(test_tune_avx2 PROPERTIES LABELS runtime
                     ENVIRONMENT "XDG_CACHE_HOME=${CMAKE_BINARY_DIR}/test-cache;DECODE_ISA=avx2")
decode_test(test_model_mutate model test_model_mutate.c tool_util.c)
