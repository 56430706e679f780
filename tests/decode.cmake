# decode (tests): the float64 reference (ref_forward.c) and decode checked against it.
decode_test(test_ref_stories decode test_ref_stories.c ref_forward.c decode_util.c)
