# runtime (tests): the schedule, NUMA topology and placement, and the threaded decoder.
decode_test(test_schedule runtime test_schedule.c)
decode_test(test_numa runtime test_numa.c)
decode_test(test_numa_bind runtime test_numa_bind.c)
set_tests_properties(test_numa_bind PROPERTIES SKIP_RETURN_CODE 77)
decode_test(test_progress runtime test_progress.c)
decode_test(test_decode_threads runtime test_decode_threads.c tool_util.c)
