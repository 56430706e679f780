# kernel (tests)
