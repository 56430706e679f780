# decode (tests)
