# tokenizer (tools)
