# synth (tests): gguf-synth's files (label model).
decode_test(test_synth model test_synth.c tool_util.c)
