# gguf (tests)
decode_test(test_gguf_read model test_gguf_read.c)
decode_test(test_gguf_write model test_gguf_write.c)
