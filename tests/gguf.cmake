# gguf (tests)
