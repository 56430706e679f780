# gguf (tools)
