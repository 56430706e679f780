# decode (tests): the float64 reference (ref_forward.c) and decode checked against it.
decode_test(test_ref_stories decode test_ref_stories.c ref_forward.c decode_util.c tool_util.c)
decode_test(test_decode_stories decode test_decode_stories.c ref_forward.c decode_util.c tool_util.c)
decode_test(test_decode_synth decode test_decode_synth.c ref_forward.c decode_util.c tool_util.c)
# Hostile command lines and environments (tests/test_hostile.sh): files kept, no hang, no crash.
add_test(NAME test_hostile COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_hostile.sh
         ${CMAKE_RUNTIME_OUTPUT_DIRECTORY} ${DECODE_SHARED_DIR} "${SANITIZE}")
set_tests_properties(test_hostile PROPERTIES LABELS decode TIMEOUT 1200
                     ENVIRONMENT "XDG_CACHE_HOME=${CMAKE_BINARY_DIR}/test-cache")
# The packed-weight cache file (tests/test_pack_cache.sh keeps its own cache directory), with
# faults injected under LD_PRELOAD (tests/fault_inject.c).
add_library(fault_inject SHARED fault_inject.c)
target_link_libraries(fault_inject PRIVATE ${CMAKE_DL_LIBS})
# Not instrumented: its mmap wrapper runs before a sanitizer's runtime has started (TSan died there).
target_compile_options(fault_inject PRIVATE -fno-sanitize=all)
target_link_options(fault_inject PRIVATE -fno-sanitize=all)
add_test(NAME test_pack_cache COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_pack_cache.sh
         ${CMAKE_RUNTIME_OUTPUT_DIRECTORY} ${DECODE_SHARED_DIR} $<TARGET_FILE:fault_inject>)
set_tests_properties(test_pack_cache PROPERTIES LABELS "decode;runtime")
decode_test(test_decode_batch decode test_decode_batch.c tool_util.c)
# decode against llama.cpp (the peer scripts) on synth models of each architecture; exit 77 (skip)
# when the peer is not installed.
decode_test(test_peer_arch decode test_peer_arch.c decode_util.c tool_util.c)
target_link_libraries(test_peer_arch PRIVATE cjson)
set_tests_properties(test_peer_arch PROPERTIES SKIP_RETURN_CODE 77 LABELS "decode;peer")   # peer: CI leaves it out
# the tests' XDG_CACHE_HOME (a fresh tuning cache) would hide the peer's install: name it as the
# peer scripts default it, from the configuring environment
if(DEFINED ENV{PEER_DIR})
  set(DECODE_PEER_DIR "$ENV{PEER_DIR}")
elseif(DEFINED ENV{XDG_CACHE_HOME})
  set(DECODE_PEER_DIR "$ENV{XDG_CACHE_HOME}/decode-peer")
else()
  set(DECODE_PEER_DIR "$ENV{HOME}/.cache/decode-peer")
endif()
set_property(TEST test_peer_arch APPEND PROPERTY ENVIRONMENT "PEER_DIR=${DECODE_PEER_DIR}")
decode_test(test_decode_isa decode test_decode_isa.c tool_util.c)
# The packed-weight cache read back into 2 MiB pages when part of it sits in 4 KiB ones; exit 77
# (skip) where the file gets no 2 MiB pages at all.
decode_test(test_pack_reread decode test_pack_reread.c tool_util.c)
set_tests_properties(test_pack_reread PROPERTIES SKIP_RETURN_CODE 77)
