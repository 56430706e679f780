# synth (tools)
decode_tool(gguf-synth ${CMAKE_CURRENT_SOURCE_DIR}/gguf-synth.c)
