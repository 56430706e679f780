# gguf (tests)
decode_test(test_gguf_read model test_gguf_read.c)
