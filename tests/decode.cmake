# decode (tests): the float64 reference (ref_forward.c) and decode checked against it.
decode_test(test_ref_stories decode test_ref_stories.c ref_forward.c decode_util.c tool_util.c)
decode_test(test_decode_stories decode test_decode_stories.c ref_forward.c decode_util.c tool_util.c)
decode_test(test_decode_synth decode test_decode_synth.c ref_forward.c decode_util.c tool_util.c)
