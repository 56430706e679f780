# decode tests (label decode)
