# model (tests)
