# gguf (tools)
decode_tool(gguf-info gguf-info.c)
decode_tool(gguf-convert gguf-convert.c)
