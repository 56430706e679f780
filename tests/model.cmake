# model and runtime tests owned by the lead (label model / runtime)
decode_test(test_pool runtime test_pool.c)
