# tokenizer (tests)
