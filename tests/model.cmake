# model and runtime tests owned by the lead (label model / runtime)
decode_test(test_pool runtime test_pool.c)
decode_test(test_llama_load model test_llama_load.c)
